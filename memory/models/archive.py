"""Profiles, slices and the verbatim message archive (SPEC A, P, S)."""

import copy
import re
from collections.abc import Collection, Sequence
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import connections, models
from django.db.models import Q
from django.db.models.functions import Coalesce, Substr
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from memory.models.base import ProfileScopedQuerySet, choices_check

# SPEC P1: the legacy regex ^[a-z0-9_-]{1,32}$, spelled with \Z so a trailing newline fails
# too (Python's and SQLite's "$" would let "owner\n" through; PostgreSQL reads \Z alike).
PROFILE_KEY_PATTERN = r"^[a-z0-9_-]{1,32}\Z"
PROFILE_KEY_RE = re.compile(PROFILE_KEY_PATTERN)
DEFAULT_PROFILE_KEY = "owner"
profile_key_validator = RegexValidator(
    PROFILE_KEY_PATTERN,
    "A profile key is 1-32 characters of a-z, 0-9, '_' or '-'.",
    code="invalid_profile_key",
)

# Slice ids are their local start minute: YYYY-MM-DD-HHMM; card refs spell them YYYY/MM/DD/HHMM.
SLICE_KEY_PATTERN = r"^\d{4}-\d{2}-\d{2}-\d{4}\Z"
# The same in ASCII digits (Python's \d takes any script's), for keys that arrive from outside.
SLICE_KEY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{4}")


def is_slice_key(value) -> bool:
    """A well-formed slice key (a URL part, a query parameter, an imported field)."""
    return isinstance(value, str) and SLICE_KEY_RE.fullmatch(value) is not None
# Message ids (SPEC A2): c_<16 hex> from the browser, a_<epoch ms>_<short id> for replies;
# imported legacy ids are kept as they were, so the column only bounds their length.
# Use them with fullmatch (issue 16: "c_…\n" passed a "$"-anchored match).
USER_MID_RE = re.compile(r"c_[0-9a-f]{16}")
ASSISTANT_MID_RE = re.compile(r"a_[0-9]{10,16}_[0-9A-Za-z]{3,16}")
# Any id that enters from outside (mid, hid, eid, rid, a tombstone's object id; SPEC S5): 1-64
# characters, none of them '/', '\\', whitespace, a control character, a lone surrogate or
# HTML/prompt punctuation — ids appear in URLs, in pages and in the prompt. Use with fullmatch.
OBJECT_ID_RE = re.compile(r"[^\s/\\\x00-\x1f\x7f\ud800-\udfff<>\"'`\[\]{}]{1,64}")


def validate_profile_key(key: str) -> str:
    """Return the key if it matches SPEC P1's regex, else raise ValidationError."""
    profile_key_validator(key)
    return key


class Language(models.TextChoices):
    ZH = "zh", "中文"
    EN = "en", "English"


class ProfileQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(user=user)


class ProfileManager(models.Manager.from_queryset(ProfileQuerySet)):
    def reread(self, profile: "Profile") -> "Profile":
        """A copy of `profile` with the fields a prompt reads (name, persona, language, and the
        model, its connection and the temperature of its companion settings) as stored now.

        Plain SQL: one primary-key read, on every turn, where the ORM's query building cost
        ten times the read itself (BENCH §2)."""
        with connections[self.db].cursor() as cursor:
            cursor.execute(
                "SELECT name, persona, language, model, model_connection_id, temperature FROM memory_profile"
                " WHERE id = %s", [profile.pk]
            )
            row = cursor.fetchone()
        if row is None:
            raise Profile.DoesNotExist(f"profile {profile.pk} is gone")
        fresh = copy.copy(profile)
        fresh.name, fresh.persona, fresh.language, fresh.model, fresh.model_connection_id, fresh.temperature = row
        return fresh

    # The turn lease (S3, previously.chat.guard): taken, renewed and let go on every turn, in
    # plain statements for the same reason as `reread`.
    def take_turn(self, pk: int, *, now, until) -> bool:
        """`filter(pk=pk).filter(Q(turn_until__isnull=True) | Q(turn_until__lt=now))
        .update(turn_until=until) == 1`: the lease, unless another turn holds it."""
        return self._lease("UPDATE memory_profile SET turn_until = %s WHERE id = %s"
                           " AND (turn_until IS NULL OR turn_until < %s)", until, pk, now) == 1

    def renew_turn(self, pk: int, *, until) -> None:
        """`filter(pk=pk, turn_until__isnull=False).update(turn_until=until)`: a held lease's end
        moved; a released one stays free."""
        self._lease("UPDATE memory_profile SET turn_until = %s WHERE id = %s AND turn_until IS NOT NULL", until, pk)

    def release_turn(self, pk: int) -> None:
        """`filter(pk=pk).update(turn_until=None)`."""
        self._lease("UPDATE memory_profile SET turn_until = NULL WHERE id = %s", pk)

    def _lease(self, sql: str, *params) -> int:
        """Rows changed by one lease statement; its datetimes adapted as the ORM would."""
        conn = connections[self.db]
        adapted = [conn.ops.adapt_datetimefield_value(p) if isinstance(p, datetime) else p for p in params]
        with conn.cursor() as cursor:
            cursor.execute(sql, adapted)
            return cursor.rowcount


class Profile(models.Model):
    """One companion's memory space; every other row belongs to exactly one (P1, P2)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profiles", verbose_name=_("user")
    )
    key = models.CharField(
        max_length=32, default=DEFAULT_PROFILE_KEY, validators=[profile_key_validator], verbose_name=_("key")
    )
    name = models.CharField(max_length=100, blank=True, verbose_name=_("name"))
    persona = models.TextField(blank=True, help_text=_("The identity constitution."), verbose_name=_("persona"))
    language = models.CharField(max_length=2, choices=Language.choices, default=Language.ZH, verbose_name=_("language"))
    proactive_enabled = models.BooleanField(default=True, verbose_name=_("proactive enabled"))
    # Companion settings (issue 17 point 8): empty / NULL means "the environment's".
    model = models.CharField(max_length=200, blank=True, verbose_name=_("model"))
    # The connection whose list `model` was picked from (O4); NULL: the server's default one.
    model_connection = models.ForeignKey("memory.Connection", null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="+", verbose_name=_("model connection"))
    temperature = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)], verbose_name=_("temperature")
    )
    quiet_from = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(23)], verbose_name=_("quiet from")
    )
    quiet_until = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(23)], verbose_name=_("quiet until")
    )
    # The person's IANA time zone as the browser last sent it (R7); every page shows times in it.
    tz = models.CharField(max_length=64, blank=True, verbose_name=_("time zone"))
    # H2: the companion's picture (a character card's image), re-encoded through memory.images:
    # {"path", "thumb", "content_type", "width", "height", "sha256"}; NULL when it has none.
    avatar = models.JSONField(null=True, blank=True, verbose_name=_("avatar"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    # S3: one turn in flight per profile, across tabs and server processes: a lease taken with
    # one conditional UPDATE (previously/chat/guard.py), released when the turn ends.
    turn_until = models.DateTimeField(null=True, blank=True, editable=False, verbose_name=_("turn lease until"))

    objects = ProfileManager()

    class Meta:
        verbose_name = _("profile")
        verbose_name_plural = _("profiles")
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="profile_unique_key_per_user"),
            models.CheckConstraint(
                condition=models.Q(key__regex=PROFILE_KEY_PATTERN), name="profile_key_format"
            ),
            choices_check("language", Language, "profile_language_valid"),
        ]
        ordering = ["user_id", "key"]

    def __str__(self) -> str:
        return f"{self.user}/{self.key}"

    @property
    def display_name(self) -> str:
        """The companion's name; unnamed, the default profile reads "Your companion" (its key,
        "owner", would read as the person), any other its key."""
        if self.name:
            return self.name
        return gettext("Your companion") if self.key == DEFAULT_PROFILE_KEY else self.key

    @property
    def proactive_hours(self) -> str | None:
        """The hours the companion may write first, as PREVIOUSLY_PROACTIVE_HOURS spells them
        ("8-22"), from this profile's quiet hours; None when it has none of its own."""
        if self.quiet_from is None or self.quiet_until is None or self.quiet_from == self.quiet_until:
            return None
        return f"{self.quiet_until}-{self.quiet_from}"


class SliceQuerySet(ProfileScopedQuerySet):
    def open(self):
        return self.filter(ended_at__isnull=True)

    def closed(self):
        return self.filter(ended_at__isnull=False)

    def by_ref(self, ref: str):
        """Look up by a card ref `YYYY/MM/DD/HHMM` (or the key spelling)."""
        return self.filter(key=ref.replace("/", "-"))

    def with_line_count(self):
        """Each slice with `n_lines`, its count of live (not deleted) lines: a subquery per slice
        returned, so a page of slices counts its own lines, not the whole archive's (a join with
        GROUP BY counted every line of the profile before the page's LIMIT: 55 ms at 20k lines)."""
        lines = (
            Message.objects.filter(slice=models.OuterRef("pk"), deleted_at__isnull=True)
            .order_by().values("slice").annotate(n=models.Count("pk")).values("n")
        )
        return self.annotate(n_lines=Coalesce(models.Subquery(lines), 0))

    def with_first_words(self, chars: int):
        """Each slice with `first_words`: up to `chars` characters of its first live line with text."""
        first = (
            Message.objects.live().filter(slice=models.OuterRef("pk")).exclude(content="")
            .order_by("created_at", "id").values("content")[:1]
        )
        return self.annotate(first_words=Substr(models.Subquery(first), 1, chars))


class SliceManager(models.Manager.from_queryset(SliceQuerySet)):
    # The two statements of every archive write, in plain SQL: there the ORM's query building
    # cost several times the statements themselves (BENCH §2).
    _TOUCH_SQL = "UPDATE memory_slice SET last_message_at = %s WHERE id = %s"

    def newest_open(self, profile_id: int):
        """`for_profile(p).open().order_by("-started_at").first()`, in one plain statement."""
        sql = (
            f"SELECT {columns(self.model)} FROM memory_slice WHERE profile_id = %s AND ended_at IS NULL"
            " ORDER BY started_at DESC LIMIT 1"
        )
        return next(iter(self.raw(sql, [profile_id])), None)

    def touch(self, pk: int, *, at) -> None:
        """`filter(pk=pk).update(last_message_at=at)`, in one plain statement."""
        conn = connections[self.db]
        with conn.cursor() as cursor:
            cursor.execute(self._TOUCH_SQL, [conn.ops.adapt_datetimefield_value(at), pk])


class SliceCloseReason(models.TextChoices):
    GAP = "gap", _("idle gap")
    NEW_CONVERSATION = "new_conversation", _("new conversation")
    IDLE_CHECK = "idle_check", _("periodic idle check")
    IMPORT = "import", _("imported")


class Slice(models.Model):
    """One contiguous conversation (SPEC S1); keyed by its local start minute."""

    CloseReason = SliceCloseReason

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="slices", verbose_name=_("profile"))
    key = models.CharField(max_length=15, validators=[RegexValidator(SLICE_KEY_PATTERN)], verbose_name=_("key"))
    started_at = models.DateTimeField(verbose_name=_("started at"))
    last_message_at = models.DateTimeField(verbose_name=_("last message at"))
    ended_at = models.DateTimeField(null=True, blank=True, verbose_name=_("ended at"))
    close_reason = models.CharField(max_length=20, choices=CloseReason.choices, blank=True, verbose_name=_("close reason"))
    tz = models.CharField(max_length=64, default="UTC", verbose_name=_("tz"))
    # K9: the card as injected into prompts, frozen for the life of the slice; NULL until the
    # slice's first turn freezes it ("" is a frozen empty card).
    injected_card = models.TextField(null=True, blank=True, verbose_name=_("injected card"))  # noqa: DJ001 - NULL means "not frozen yet"

    objects = SliceManager()

    class Meta:
        verbose_name = _("slice")
        verbose_name_plural = _("slices")
        constraints = [
            models.UniqueConstraint(fields=["profile", "key"], name="slice_unique_key_per_profile"),
            models.CheckConstraint(
                condition=models.Q(key__regex=SLICE_KEY_PATTERN), name="slice_key_format"
            ),
            models.CheckConstraint(
                condition=models.Q(close_reason="") | models.Q(close_reason__in=SliceCloseReason.values),
                name="slice_close_reason_valid",
            ),
        ]
        indexes = [models.Index(fields=["profile", "ended_at", "last_message_at"])]
        ordering = ["profile_id", "started_at"]

    def __str__(self) -> str:
        return f"{self.profile.key}:{self.key}"

    @property
    def ref(self) -> str:
        """The card's spelling of this slice id: YYYY/MM/DD/HHMM."""
        return self.key.replace("-", "/")

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    def close(self, *, reason: str, at=None) -> None:
        """End the slice at its last message (or `at`); a closed slice stays closed."""
        if self.ended_at is not None:
            return
        self.ended_at = at or self.last_message_at
        self.close_reason = reason
        self.save(update_fields=["ended_at", "close_reason"])


class SliceLogEntryKind(models.TextChoices):
    ANALYZER = "analyzer", _("analyzer verdict")
    EVOLUTION = "evolution", _("evolution event")
    NOTE = "note", _("note")


class SliceLogEntry(models.Model):
    """The slice's cognitive log (SPEC S2): analyzer verdicts and evolution events."""

    Kind = SliceLogEntryKind

    slice = models.ForeignKey(Slice, on_delete=models.CASCADE, related_name="log_entries", verbose_name=_("slice"))
    kind = models.CharField(max_length=20, choices=Kind.choices, verbose_name=_("kind"))
    summary = models.CharField(max_length=500, blank=True, verbose_name=_("summary"))
    data = models.JSONField(default=dict, blank=True, verbose_name=_("data"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("slice log entry")
        constraints = [choices_check("kind", SliceLogEntryKind, "slicelog_kind_valid")]
        ordering = ["slice_id", "created_at", "id"]
        verbose_name_plural = _("slice log entries")

    def __str__(self) -> str:
        return f"{self.slice} {self.kind}: {self.summary}"


# P3: lines that came from the oldest legacy records (`mem_<ts>_<rand>`, no profile, imported
# under `owner`) are readable only while MEM_READ_LEGACY is on; off, they are kept but neither
# recalled nor shown.
LEGACY_V0_PREFIX = "mem_"


def columns(model: type[models.Model], *, defer: Collection[str] = ()) -> str:
    """The model's own columns for a raw SELECT, named (`defer`: attnames left out). Never `*`:
    a column a newer migration added would change the statement's result, which PostgreSQL
    refuses to return for a statement a running server prepared before (memory.postgresql)."""
    return ", ".join(f.column for f in model._meta.concrete_fields if f.attname not in defer)


def legacy_readable() -> bool:
    return bool(settings.MEM_READ_LEGACY)


def legacy_sql(alias: str = "") -> str:
    """The SQL condition (with a leading AND) that hides legacy v0 lines when they are not readable."""
    if legacy_readable():
        return ""
    column = f"{alias}.legacy_key" if alias else "legacy_key"
    return f" AND substr({column}, 1, 4) <> '{LEGACY_V0_PREFIX}'"


class MessageQuerySet(ProfileScopedQuerySet):
    def live(self):
        """Rows not soft-deleted, and not legacy v0 lines while MEM_READ_LEGACY is off (P3)."""
        qs = super().live()
        return qs if legacy_readable() else qs.exclude(legacy_key__startswith=LEGACY_V0_PREFIX)

    def in_slice(self, slice_):
        return self.filter(slice=slice_)

    def chronological(self):
        return self.order_by("created_at", "id")

    def page_from(self, mid: str | None, *, newer: bool = False, anchors: "MessageQuerySet | None" = None):
        """These lines past the line `mid` in keyset order (created_at, id), that line left out:
        the older ones newest first, or the `newer` ones oldest first. All of them when `mid` is
        empty; none when `mid` is not among `anchors` (default: these lines)."""
        order = ("created_at", "id") if newer else ("-created_at", "-id")
        if not mid:
            return self.order_by(*order)
        anchor = (self if anchors is None else anchors).filter(mid=mid).values("created_at", "id").first()
        if anchor is None:
            return self.none()
        past = "gt" if newer else "lt"
        return self.filter(
            Q(**{f"created_at__{past}": anchor["created_at"]})
            | Q(created_at=anchor["created_at"], **{f"id__{past}": anchor["id"]})
        ).order_by(*order)


class MessageManager(models.Manager.from_queryset(MessageQuerySet)):
    """Two reads on every turn in plain SQL through `raw()` (fields convert as usual): half the
    cost of the querysets they mirror (BENCH §2); tests compare each with its queryset."""

    def turns_before(self, message: "Message", *, limit: int) -> list["Message"]:
        """The slice's complete, live, non-system lines up to `message` (itself left out), at most
        `limit`, newest first: `live().in_slice().filter(status=COMPLETE, created_at__lte=…)`."""
        sql = (
            f"SELECT {columns(Message)} FROM memory_message WHERE slice_id = %s AND deleted_at IS NULL AND status = %s"
            " AND created_at <= %s AND id <> %s AND message_type <> %s" + legacy_sql()
            + " ORDER BY created_at DESC, id DESC LIMIT %s"
        )
        params = [
            message.slice_id, Message.Status.COMPLETE,
            connections[self.db].ops.adapt_datetimefield_value(message.created_at), message.pk,
            Message.Type.SYSTEM, limit,
        ]
        return list(self.raw(sql, params))

    def replies_to(self, line_ids: Collection[int]) -> list[tuple[int, str]]:
        """(reply_of_id, mid) of every reply to these lines, oldest first:
        `filter(reply_of_id__in=…, speaker=ASSISTANT).order_by("created_at", "id")
        .values_list("reply_of_id", "mid")` in one plain statement (each reply the chat stores
        learns its place among them, U2)."""
        if not line_ids:
            return []
        with connections[self.db].cursor() as cursor:
            cursor.execute(
                f"SELECT reply_of_id, mid FROM memory_message WHERE speaker = %s"
                f" AND reply_of_id IN ({', '.join(['%s'] * len(line_ids))}) ORDER BY created_at, id",
                [Message.Speaker.ASSISTANT, *line_ids],
            )
            return cursor.fetchall()

    def live_among(self, profile_id: int, ids: Sequence[int], *, defer: Sequence[str] = ()) -> list["Message"]:
        """The profile's live, non-system messages among `ids` (`for_profile().live()`), unordered,
        the `defer` fields left to load on access. No ORDER BY: with one, SQLite may walk the
        (profile, created_at) index over the whole archive."""
        sql = (
            f"SELECT {columns(Message, defer=defer)} FROM memory_message WHERE profile_id = %s AND deleted_at IS NULL"
            f" AND message_type <> %s AND id IN ({', '.join(['%s'] * len(ids))})" + legacy_sql()
        )
        return list(self.raw(sql, [profile_id, Message.Type.SYSTEM, *ids]))


class MessageSpeaker(models.TextChoices):
    USER = "user", _("user")
    ASSISTANT = "assistant", _("assistant")
    SYSTEM = "system", _("system")


class MessageType(models.TextChoices):
    TEXT = "text", "text"
    IMAGE = "image", "image"
    PROACTIVE = "proactive", "proactive"
    SYSTEM = "system", "system"


class MessageStatus(models.TextChoices):
    COMPLETE = "complete", _("complete")
    FAILED = "failed", _("failed (partial reply)")
    STOPPED = "stopped", _("stopped by the person (partial reply)")


class Message(models.Model):
    """One archived line, verbatim (SPEC A1); the single source of truth for messages."""

    Speaker = MessageSpeaker

    Type = MessageType

    Status = MessageStatus

    # No index of their own: (profile, created_at), (profile, mid), (profile, content_hash) and
    # (slice, created_at) lead with them already, and every index is written per line (issue 24
    # point 6: the two cost 3-7 % of a 200k-line import's apply).
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="messages", verbose_name=_("profile"),
                                db_index=False)
    slice = models.ForeignKey(Slice, on_delete=models.CASCADE, related_name="messages", verbose_name=_("slice"),
                              db_index=False)
    mid = models.CharField(max_length=64, verbose_name=_("mid"))
    speaker = models.CharField(max_length=10, choices=Speaker.choices, verbose_name=_("speaker"))
    message_type = models.CharField(max_length=20, choices=Type.choices, default=Type.TEXT, verbose_name=_("message type"))
    content = models.TextField(blank=True, verbose_name=_("content"))
    # The assistant's raw output with markers (A5), kept beside the cleaned content.
    raw_content = models.TextField(blank=True, verbose_name=_("raw content"))
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.COMPLETE, verbose_name=_("status"))
    created_at = models.DateTimeField(db_index=True, verbose_name=_("created at"))
    # The user's local clock when the line was said (R7): day key, hour, period of day.
    local_day_key = models.CharField(max_length=10, blank=True, verbose_name=_("local day key"))
    local_hour = models.PositiveSmallIntegerField(null=True, blank=True, verbose_name=_("local hour"))
    period = models.CharField(max_length=16, blank=True, verbose_name=_("period"))
    tz = models.CharField(max_length=64, blank=True, verbose_name=_("tz"))
    source_id = models.CharField(max_length=128, blank=True, verbose_name=_("source id"))
    sync_status = models.CharField(max_length=32, blank=True, verbose_name=_("sync status"))
    deleted_at = models.DateTimeField(null=True, blank=True, verbose_name=_("deleted at"))
    # D4: an admin reviewed this historic soft delete and kept it deleted ("keep").
    reviewed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("reviewed at"))
    attachment = models.JSONField(null=True, blank=True, verbose_name=_("attachment"))
    # Legacy identity (A6): the KV key it came from and strHash(profile|content).
    legacy_key = models.CharField(max_length=300, blank=True, verbose_name=_("legacy key"))
    content_hash = models.CharField(max_length=8, blank=True, verbose_name=_("content hash"))
    # Legacy value fields with no column of their own (e.g. conversation_id), kept for export.
    legacy_extra = models.JSONField(default=dict, blank=True, verbose_name=_("legacy extra"))
    # U2: a reply's user line; the replies of one line are the alternatives of that turn (the
    # chosen one live, the others hidden: recall, prompts and the card see only the chosen one).
    reply_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replies", verbose_name=_("reply of")
    )
    # U4 "why this reply": what the reply's prompt held, as ids and token counts, never text
    # (previously/chat/turn.py `trace`); deleting a recalled line leaves no copy here.
    prompt_trace = models.JSONField(null=True, blank=True, verbose_name=_("prompt trace"))

    objects = MessageManager()

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        constraints = [
            models.UniqueConstraint(fields=["profile", "mid"], name="message_unique_mid_per_profile"),
            models.CheckConstraint(condition=~models.Q(mid=""), name="message_mid_not_empty"),
            choices_check("speaker", MessageSpeaker, "message_speaker_valid"),
            choices_check("message_type", MessageType, "message_type_valid"),
            choices_check("status", MessageStatus, "message_status_valid"),
            models.CheckConstraint(
                condition=models.Q(local_hour__isnull=True) | models.Q(local_hour__lte=23),
                name="message_local_hour_range",
            ),
        ]
        indexes = [
            models.Index(fields=["profile", "created_at"]),
            models.Index(fields=["slice", "created_at"]),
            models.Index(fields=["profile", "content_hash"]),
        ]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.mid}: {self.content[:40]}"

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    def clean(self) -> None:
        if self.speaker == self.Speaker.USER and self.mid.startswith("a_"):
            raise ValidationError({"mid": "A user message cannot carry an assistant id."})


__all__ = [
    "DEFAULT_PROFILE_KEY",
    "Message",
    "Profile",
    "Slice",
    "SliceLogEntry",
    "validate_profile_key",
]
