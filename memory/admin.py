"""Admin for every memory model: the columns that matter, search, profile/status/deleted filters."""

from django.contrib import admin
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from memory import admin_actions
from memory.deletion import (
    delete_profile,
    delete_slice,
    hard_delete_message,
    purge_experience,
    purge_highlight,
    purge_relation,
)
from memory.models import (
    AccountSession,
    Card,
    CardSnapshot,
    CatchUp,
    CompanionCard,
    Connection,
    EvolutionRun,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    Invitation,
    LegacyFragment,
    LegacyMeta,
    LoreEntry,
    Message,
    ModelChoice,
    ProactiveSend,
    Profile,
    RecallDocument,
    RecallStats,
    RecallTerm,
    RecallVector,
    Relation,
    SiteSwitch,
    Slice,
    SliceLogEntry,
    Tombstone,
)


class DeletedFilter(admin.SimpleListFilter):
    title = _("deleted")
    parameter_name = "deleted"

    def lookups(self, request, model_admin):
        return [("live", _("live")), ("soft", _("soft-deleted")), ("unreviewed", _("soft-deleted, not reviewed"))]

    def queryset(self, request, queryset):
        if self.value() == "live":
            return queryset.filter(deleted_at__isnull=True)
        if self.value() == "unreviewed":
            return queryset.filter(deleted_at__isnull=False, reviewed_at__isnull=True)
        if self.value() == "soft":
            return queryset.filter(deleted_at__isnull=False)
        return queryset


PROFILE_FILTER = ("profile", admin.RelatedOnlyFieldListFilter)
SOFT_DELETE_ACTIONS = [admin_actions.purge_soft_deleted, admin_actions.keep_soft_deleted, admin_actions.restore_soft_deleted]


class ForgetThroughMemory(admin.ModelAdmin):
    """D6: the admin's delete view and its bulk "delete selected" go through memory.deletion
    (tombstones, index clean-up, files, cascades, derived text), never a bare SQL delete."""

    def forget(self, obj) -> None:
        raise NotImplementedError

    def delete_model(self, request, obj):
        self.forget(obj)

    def log_deletions(self, request, queryset):
        # The admin log must not keep a copy of what was deleted: no str(obj) (a message's
        # starts with its words), only the kind and the row id (D6).
        return [
            LogEntry.objects.create(
                user_id=request.user.pk, content_type_id=ContentType.objects.get_for_model(obj).pk,
                object_id=str(obj.pk), object_repr=f"{obj._meta.verbose_name} #{obj.pk}",
                action_flag=DELETION, change_message="deleted for good through memory.deletion",
            )
            for obj in queryset
        ]

    def response_delete(self, request, obj_display, obj_id):
        return super().response_delete(request, f"#{obj_id}", obj_id)

    def get_deleted_objects(self, objs, request):
        # The derived rows (index, fragments) are read-only here but go with memory.deletion,
        # so the admin's own per-model delete permission does not apply to them.
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_queryset(self, request, queryset):
        for pk in list(queryset.values_list("pk", flat=True)):
            obj = queryset.model.objects.filter(pk=pk).first()
            if obj is not None:  # an earlier row's cascade may have taken it
                self.forget(obj)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Derived or protective records nobody edits by hand: no add, change or delete."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyContent:
    """Archived content is read-only in the admin: a change would leave the index and every
    derived layer stale (D6)."""

    def has_add_permission(self, request):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.concrete_fields if f.name not in self.editable_fields]

    editable_fields: tuple[str, ...] = ()


@admin.register(Profile)
class ProfileAdmin(ForgetThroughMemory):
    def forget(self, obj):
        delete_profile(obj)

    list_display = ["key", "name", "user", "language", "proactive_enabled", "created_at"]
    list_filter = ["language", "proactive_enabled"]
    search_fields = ["key", "name", "user__username"]


@admin.register(Slice)
class SliceAdmin(ReadOnlyContent, ForgetThroughMemory):
    def forget(self, obj):
        delete_slice(obj)

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
class MessageAdmin(ReadOnlyContent, ForgetThroughMemory):
    def forget(self, obj):
        hard_delete_message(obj, force=True)

    list_display = ["mid", "profile", "speaker", "message_type", "short_content", "created_at", "status", "deleted_at"]
    list_filter = [PROFILE_FILTER, "speaker", "message_type", "status", DeletedFilter]
    search_fields = ["mid", "content", "legacy_key"]
    date_hierarchy = "created_at"
    raw_id_fields = ["slice"]
    actions = [*SOFT_DELETE_ACTIONS, admin_actions.repair_message_ids]

    @admin.display(description=_("content"))
    def short_content(self, obj):
        return obj.content[:80]


@admin.register(Highlight)
class HighlightAdmin(ReadOnlyContent, ForgetThroughMemory):
    editable_fields = ("flagged",)

    def forget(self, obj):
        purge_highlight(obj)

    list_display = ["hid", "profile", "mid", "short_content", "source", "flagged", "deleted_at"]
    list_filter = [PROFILE_FILTER, "source", DeletedFilter]
    search_fields = ["hid", "mid", "content"]
    raw_id_fields = ["message"]
    actions = SOFT_DELETE_ACTIONS

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
    fields = ["created_at", "actor", "action", "reason", "run", "before", "after"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Experience)
class ExperienceAdmin(ForgetThroughMemory):
    def forget(self, obj):
        purge_experience(obj)

    list_display = ["eid", "profile", "title", "status", "time_certainty", "event_time", "recorded_at", "invalid_at", "flagged", "deleted_at"]
    list_filter = [PROFILE_FILTER, "status", "time_certainty", DeletedFilter]
    search_fields = ["eid", "title", "content"]
    inlines = [ExperienceSourceInline, ExperienceHistoryInline]
    actions = [
        admin_actions.confirm_experiences,
        admin_actions.reject_experiences,
        *SOFT_DELETE_ACTIONS,
    ]


@admin.register(ExperienceHistory)
class ExperienceHistoryAdmin(admin.ModelAdmin):
    list_display = ["experience", "actor", "action", "reason", "run", "created_at"]
    list_filter = ["actor", "action"]
    raw_id_fields = ["run"]
    search_fields = ["experience__eid", "reason"]


@admin.register(Relation)
class RelationAdmin(ForgetThroughMemory):
    def forget(self, obj):
        purge_relation(obj)

    list_display = ["rid", "profile", "from_id", "type", "to_id", "flagged", "deleted_at"]
    list_filter = [PROFILE_FILTER, "type", DeletedFilter]
    search_fields = ["rid", "from_id", "to_id"]
    raw_id_fields = ["from_highlight", "from_experience", "to_highlight", "to_experience"]
    actions = SOFT_DELETE_ACTIONS


@admin.register(Tombstone)
class TombstoneAdmin(ReadOnlyAdmin):
    """Read-only: a tombstone removed by hand would let a deleted record be re-imported;
    `manage.py prune_tombstones` removes the expired ones (D5)."""

    list_display = ["kind", "object_id", "profile", "deleted_at", "expires_at", "content_hash"]
    list_filter = [PROFILE_FILTER, "kind"]
    search_fields = ["object_id", "content_hash", "legacy_key"]


class CardReadOnly:
    """K3/K16/O1: a card is changed only through the validated mutations — the agent's tools or
    the person's hand edits on the card page (memory.card_corrections), each recorded as a run.
    Staff see cards and snapshots here, read-only, with the way to that page."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # a card goes with its profile

    @admin.display(description=_("where to correct it"))
    def card_page(self, obj):
        profile = obj.profile
        return format_html(
            '{} <a href="{}?profile={}">{}</a>',
            _("Only its person corrects a card, through the validated hand edits:"),
            reverse("card"), profile.key, _("the card page"),
        )


@admin.register(Card)
class CardAdmin(CardReadOnly, admin.ModelAdmin):
    list_display = ["profile", "format", "version", "updated_at"]
    search_fields = ["profile__key", "text"]
    readonly_fields = ["card_page"]


def rendered_diff(diff: str):
    """A unified line diff as HTML, one line per row, added and removed lines marked (O1)."""
    if not diff.strip():
        return format_html('<p class="diff-empty">{}</p>', _("no change"))

    def kind(line: str) -> str:
        if line.startswith(("+++", "---", "@@")):
            return "diff-meta"
        return {"+": "diff-add", "-": "diff-del"}.get(line[:1], "diff-same")

    rows = format_html_join("", '<span class="{}">{}</span>', ((kind(x), x or " ") for x in diff.splitlines()))
    return format_html('<pre class="diff-rendered">{}</pre>', rows)


class DiffMedia:
    css = {"all": ["previously/admin-diff.css"]}


@admin.register(CardSnapshot)
class CardSnapshotAdmin(CardReadOnly, admin.ModelAdmin):
    list_display = ["slice", "profile", "card_version", "created_at"]
    list_filter = [PROFILE_FILTER]
    raw_id_fields = ["slice", "run"]
    readonly_fields = ["card_page", "version_diff"]
    Media = DiffMedia

    @admin.display(description=_("diff (the run that made this version)"))
    def version_diff(self, obj: CardSnapshot):
        return rendered_diff(obj.run.diff if obj.run_id else "")


@admin.register(EvolutionRun)
class EvolutionRunAdmin(admin.ModelAdmin):
    list_display = ["id", "profile", "slice", "trigger", "status", "skip_reason", "created_at", "finished_at"]
    list_filter = [PROFILE_FILTER, "trigger", "status"]
    search_fields = ["summary", "skip_reason", "error"]
    raw_id_fields = ["slice"]
    # A run is a record: its card before/after and diff are shown, never edited (O1).
    readonly_fields = ["card_before", "rendered_diff", "card_after", "diff", "steps"]
    fieldsets = [
        (None, {"fields": ["profile", "slice", "trigger", "status", "skip_reason", "summary", "error", "model_name", "attempts", "started_at", "finished_at"]}),
        (_("card versions"), {"fields": [("card_before", "rendered_diff", "card_after")], "classes": ["diff-row"]}),
        (_("raw record"), {"fields": ["diff", "steps"], "classes": ["collapse"]}),
    ]
    Media = DiffMedia

    @admin.display(description=_("diff"))
    def rendered_diff(self, obj: EvolutionRun):
        return rendered_diff(obj.diff)


@admin.register(LegacyFragment)
class LegacyFragmentAdmin(ReadOnlyContent, admin.ModelAdmin):
    """Read-only, never deleted here: a fragment goes with its message (memory.deletion)."""

    def has_delete_permission(self, request, obj=None):
        return False

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
class RecallDocumentAdmin(ReadOnlyAdmin):
    """The index's token stream, read-only: it is derived from the archive."""

    list_display = ["message", "profile", "pos", "slice", "speaker", "day", "tokens"]
    list_filter = [PROFILE_FILTER]
    search_fields = ["tokens"]


class _DerivedRecallAdmin(ReadOnlyAdmin):
    """Recall statistics, read-only: kept by memory.recall.index with every archive write."""

    list_filter = [PROFILE_FILTER]


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


@admin.register(CompanionCard)
class CompanionCardAdmin(admin.ModelAdmin):
    """The character card a companion was made from (H2); its identity finds it on re-import."""

    list_display = ["profile", "spec", "source_name", "imported_at"]
    list_filter = [PROFILE_FILTER, "spec"]
    search_fields = ["source_name"]
    readonly_fields = ["identity", "imported_at"]


@admin.register(LoreEntry)
class LoreEntryAdmin(admin.ModelAdmin):
    """A card's lorebook entries (H2): an enabled one enters the prompt when a key is said."""

    list_display = ["profile", "position", "name", "enabled", "constant"]
    list_filter = [PROFILE_FILTER, "enabled", "constant"]
    search_fields = ["name", "content"]


@admin.register(CatchUp)
class CatchUpAdmin(admin.ModelAdmin):
    """The card's catch-ups over history (H3); stop one from the companion's settings page."""

    list_display = ["profile", "status", "planned", "done", "failed", "created_at", "finished_at"]
    list_filter = [PROFILE_FILTER, "status"]
    raw_id_fields = ["current"]


# --- Accounts and connections (O4, O5): managed on their own pages, seen read-only here -----


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "created_by", "created_at", "expires_at", "used_at", "used_by"]
    exclude = ["digest"]


@admin.register(AccountSession)
class AccountSessionAdmin(ReadOnlyAdmin):
    list_display = ["user", "user_agent", "ip_address", "last_seen"]
    exclude = ["session_key"]


@admin.register(SiteSwitch)
class SiteSwitchAdmin(ReadOnlyAdmin):
    list_display = ["name", "on"]


@admin.register(Connection)
class ConnectionAdmin(ReadOnlyAdmin):
    """The key never reaches a page: it is left out (O4); /connections/ manages connections."""

    list_display = ["__str__", "base_url", "created_at"]
    exclude = ["sealed_key"]


@admin.register(ModelChoice)
class ModelChoiceAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "version"]
