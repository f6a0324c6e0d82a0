"""Admin for every memory model: the columns that matter, search, profile/status/deleted filters."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from memory import admin_actions
from memory.models import (
    Card,
    CardSnapshot,
    EvolutionRun,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    ProactiveSend,
    Profile,
    RecallDocument,
    RecallStats,
    RecallTerm,
    RecallVector,
    Relation,
    Slice,
    SliceLogEntry,
    Tombstone,
)


class DeletedFilter(admin.SimpleListFilter):
    title = _("deleted")
    parameter_name = "deleted"

    def lookups(self, request, model_admin):
        return [("live", _("live")), ("soft", _("soft-deleted"))]

    def queryset(self, request, queryset):
        if self.value() == "live":
            return queryset.filter(deleted_at__isnull=True)
        if self.value() == "soft":
            return queryset.filter(deleted_at__isnull=False)
        return queryset


PROFILE_FILTER = ("profile", admin.RelatedOnlyFieldListFilter)


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "user", "language", "proactive_enabled", "created_at"]
    list_filter = ["language", "proactive_enabled"]
    search_fields = ["key", "name", "user__username"]


@admin.register(Slice)
class SliceAdmin(admin.ModelAdmin):
    list_display = ["key", "profile", "started_at", "last_message_at", "ended_at", "close_reason"]
    list_filter = [PROFILE_FILTER, "close_reason"]
    search_fields = ["key"]
    date_hierarchy = "started_at"


@admin.register(SliceLogEntry)
class SliceLogEntryAdmin(admin.ModelAdmin):
    list_display = ["slice", "kind", "summary", "created_at"]
    list_filter = ["kind"]
    search_fields = ["summary", "slice__key"]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["mid", "profile", "speaker", "message_type", "short_content", "created_at", "status", "deleted_at"]
    list_filter = [PROFILE_FILTER, "speaker", "message_type", "status", DeletedFilter]
    search_fields = ["mid", "content", "legacy_key"]
    date_hierarchy = "created_at"
    raw_id_fields = ["slice"]
    actions = [admin_actions.purge_soft_deleted, admin_actions.restore_soft_deleted]

    @admin.display(description=_("content"))
    def short_content(self, obj):
        return obj.content[:80]


@admin.register(Highlight)
class HighlightAdmin(admin.ModelAdmin):
    list_display = ["hid", "profile", "mid", "short_content", "source", "flagged", "deleted_at"]
    list_filter = [PROFILE_FILTER, "source", DeletedFilter]
    search_fields = ["hid", "mid", "content"]
    raw_id_fields = ["message"]
    actions = [admin_actions.purge_soft_deleted, admin_actions.restore_soft_deleted]

    @admin.display(description=_("content"))
    def short_content(self, obj):
        return obj.content[:80]


@admin.register(Favourite)
class FavouriteAdmin(admin.ModelAdmin):
    list_display = ["profile", "message", "excerpt", "created_at"]
    list_filter = [PROFILE_FILTER]
    search_fields = ["excerpt"]
    raw_id_fields = ["message", "highlight"]


class ExperienceSourceInline(admin.TabularInline):
    model = ExperienceSource
    raw_id_fields = ["message"]
    extra = 0


class ExperienceHistoryInline(admin.TabularInline):
    model = ExperienceHistory
    fields = ["created_at", "actor", "action", "reason", "before", "after"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Experience)
class ExperienceAdmin(admin.ModelAdmin):
    list_display = ["eid", "profile", "title", "status", "time_certainty", "event_time", "recorded_at", "invalid_at", "flagged", "deleted_at"]
    list_filter = [PROFILE_FILTER, "status", "time_certainty", DeletedFilter]
    search_fields = ["eid", "title", "content"]
    inlines = [ExperienceSourceInline, ExperienceHistoryInline]
    actions = [
        admin_actions.confirm_experiences,
        admin_actions.reject_experiences,
        admin_actions.purge_soft_deleted,
        admin_actions.restore_soft_deleted,
    ]


@admin.register(ExperienceHistory)
class ExperienceHistoryAdmin(admin.ModelAdmin):
    list_display = ["experience", "actor", "action", "reason", "created_at"]
    list_filter = ["actor", "action"]
    search_fields = ["experience__eid", "reason"]


@admin.register(Relation)
class RelationAdmin(admin.ModelAdmin):
    list_display = ["rid", "profile", "from_id", "type", "to_id", "flagged", "deleted_at"]
    list_filter = [PROFILE_FILTER, "type", DeletedFilter]
    search_fields = ["rid", "from_id", "to_id"]
    raw_id_fields = ["from_highlight", "from_experience", "to_highlight", "to_experience"]
    actions = [admin_actions.purge_soft_deleted, admin_actions.restore_soft_deleted]


@admin.register(Tombstone)
class TombstoneAdmin(admin.ModelAdmin):
    list_display = ["kind", "object_id", "profile", "deleted_at", "expires_at", "content_hash"]
    list_filter = [PROFILE_FILTER, "kind"]
    search_fields = ["object_id", "content_hash", "legacy_key"]


@admin.register(Card)
class CardAdmin(admin.ModelAdmin):
    list_display = ["profile", "format", "version", "updated_at"]
    search_fields = ["profile__key", "text"]


@admin.register(CardSnapshot)
class CardSnapshotAdmin(admin.ModelAdmin):
    list_display = ["slice", "profile", "card_version", "created_at"]
    list_filter = [PROFILE_FILTER]
    raw_id_fields = ["slice", "run"]


@admin.register(EvolutionRun)
class EvolutionRunAdmin(admin.ModelAdmin):
    list_display = ["pk", "profile", "slice", "trigger", "status", "skip_reason", "created_at", "finished_at"]
    list_filter = [PROFILE_FILTER, "trigger", "status"]
    search_fields = ["summary", "skip_reason", "error"]
    raw_id_fields = ["slice"]


@admin.register(LegacyFragment)
class LegacyFragmentAdmin(admin.ModelAdmin):
    list_display = ["key", "profile", "role", "ts", "disposition", "message"]
    list_filter = [PROFILE_FILTER, "disposition", "role"]
    search_fields = ["key", "content", "fingerprint"]
    raw_id_fields = ["message"]


@admin.register(LegacyMeta)
class LegacyMetaAdmin(admin.ModelAdmin):
    list_display = ["key", "profile", "value"]
    list_filter = [PROFILE_FILTER]
    search_fields = ["key", "value"]


@admin.register(ProactiveSend)
class ProactiveSendAdmin(admin.ModelAdmin):
    """Messages the companion wrote first (K15): the day's count and the occasions announced."""

    list_display = ["created_at", "profile", "day", "reason", "subject", "message"]
    list_filter = [PROFILE_FILTER, "reason"]
    search_fields = ["subject"]
    raw_id_fields = ["message"]
    date_hierarchy = "created_at"


@admin.register(RecallDocument)
class RecallDocumentAdmin(admin.ModelAdmin):
    """The index's token stream, read-only: it is derived from the archive."""

    list_display = ["message", "profile", "pos", "slice", "speaker", "day", "tokens"]
    list_filter = [PROFILE_FILTER]
    search_fields = ["tokens"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class _DerivedRecallAdmin(admin.ModelAdmin):
    """Recall statistics, read-only: kept by memory.recall.index with every archive write."""

    list_filter = [PROFILE_FILTER]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RecallTerm)
class RecallTermAdmin(_DerivedRecallAdmin):
    list_display = ["term", "profile", "df"]
    search_fields = ["term"]


@admin.register(RecallStats)
class RecallStatsAdmin(_DerivedRecallAdmin):
    list_display = ["profile", "n_docs", "n_tokens", "next_pos"]


@admin.register(RecallVector)
class RecallVectorAdmin(_DerivedRecallAdmin):
    """Sentence vectors (R8), read-only: written with the line or by `manage.py embed_backfill`."""

    list_display = ["message", "profile", "model"]
    list_filter = [PROFILE_FILTER, "model"]
    exclude = ["vector", "bits"]
    raw_id_fields = ["message"]
