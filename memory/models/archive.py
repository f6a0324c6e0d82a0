"""Profiles, slices and the verbatim message archive (SPEC A, P, S)."""

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import connections, models

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
# Message ids (SPEC A2): c_<16 hex> from the browser, a_<epoch ms>_<short id> for replies;
# imported legacy ids are kept as they were, so the column only bounds their length.
USER_MID_RE = re.compile(r"^c_[0-9a-f]{16}$")
ASSISTANT_MID_RE = re.compile(r"^a_\d{10,16}_[0-9A-Za-z]{3,16}$")


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


class Profile(models.Model):
    """One companion's memory space; every other row belongs to exactly one (P1, P2)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profiles"
    )
    key = models.CharField(
        max_length=32, default=DEFAULT_PROFILE_KEY, validators=[profile_key_validator]
    )
    name = models.CharField(max_length=100, blank=True)
    persona = models.TextField(blank=True, help_text="The identity constitution.")
    language = models.CharField(max_length=2, choices=Language.choices, default=Language.ZH)
    proactive_enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProfileQuerySet.as_manager()

    class Meta:
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
        return self.name or self.key


class SliceQuerySet(ProfileScopedQuerySet):
    def open(self):
        return self.filter(ended_at__isnull=True)

    def closed(self):
        return self.filter(ended_at__isnull=False)

    def by_ref(self, ref: str):
        """Look up by a card ref `YYYY/MM/DD/HHMM` (or the key spelling)."""
        return self.filter(key=ref.replace("/", "-"))


class SliceManager(models.Manager.from_queryset(SliceQuerySet)):
    # The two statements of every archive write, in plain SQL: there the ORM's query building
    # cost several times the statements themselves (BENCH §2).
    _NEWEST_OPEN_SQL = (
        "SELECT * FROM memory_slice WHERE profile_id = %s AND ended_at IS NULL ORDER BY started_at DESC LIMIT 1"
    )
    _TOUCH_SQL = "UPDATE memory_slice SET last_message_at = %s WHERE id = %s"

    def newest_open(self, profile_id: int):
        """`for_profile(p).open().order_by("-started_at").first()`, in one plain statement."""
        return next(iter(self.raw(self._NEWEST_OPEN_SQL, [profile_id])), None)

    def touch(self, pk: int, *, at) -> None:
        """`filter(pk=pk).update(last_message_at=at)`, in one plain statement."""
        conn = connections[self.db]
        with conn.cursor() as cursor:
            cursor.execute(self._TOUCH_SQL, [conn.ops.adapt_datetimefield_value(at), pk])


class SliceCloseReason(models.TextChoices):
    GAP = "gap", "idle gap"
    NEW_CONVERSATION = "new_conversation", "new conversation"
    IDLE_CHECK = "idle_check", "periodic idle check"
    IMPORT = "import", "imported"


class Slice(models.Model):
    """One contiguous conversation (SPEC S1); keyed by its local start minute."""

    CloseReason = SliceCloseReason

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="slices")
    key = models.CharField(max_length=15, validators=[RegexValidator(SLICE_KEY_PATTERN)])
    started_at = models.DateTimeField()
    last_message_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    close_reason = models.CharField(max_length=20, choices=CloseReason.choices, blank=True)
    tz = models.CharField(max_length=64, default="UTC")
    # K9: the card as injected into prompts, frozen for the life of the slice; NULL until the
    # slice's first turn freezes it ("" is a frozen empty card).
    injected_card = models.TextField(null=True, blank=True)  # noqa: DJ001 - NULL means "not frozen yet"

    objects = SliceManager()

    class Meta:
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
    ANALYZER = "analyzer", "analyzer verdict"
    EVOLUTION = "evolution", "evolution event"
    NOTE = "note", "note"


class SliceLogEntry(models.Model):
    """The slice's cognitive log (SPEC S2): analyzer verdicts and evolution events."""

    Kind = SliceLogEntryKind

    slice = models.ForeignKey(Slice, on_delete=models.CASCADE, related_name="log_entries")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    summary = models.CharField(max_length=500, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [choices_check("kind", SliceLogEntryKind, "slicelog_kind_valid")]
        ordering = ["slice_id", "created_at", "id"]
        verbose_name_plural = "slice log entries"

    def __str__(self) -> str:
        return f"{self.slice} {self.kind}: {self.summary}"


class MessageQuerySet(ProfileScopedQuerySet):
    def in_slice(self, slice_):
        return self.filter(slice=slice_)

    def chronological(self):
        return self.order_by("created_at", "id")


class MessageSpeaker(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    SYSTEM = "system", "system"


class MessageType(models.TextChoices):
    TEXT = "text", "text"
    IMAGE = "image", "image"
    PROACTIVE = "proactive", "proactive"
    SYSTEM = "system", "system"


class MessageStatus(models.TextChoices):
    COMPLETE = "complete", "complete"
    FAILED = "failed", "failed (partial reply)"


class Message(models.Model):
    """One archived line, verbatim (SPEC A1); the single source of truth for messages."""

    Speaker = MessageSpeaker

    Type = MessageType

    Status = MessageStatus

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="messages")
    slice = models.ForeignKey(Slice, on_delete=models.CASCADE, related_name="messages")
    mid = models.CharField(max_length=64)
    speaker = models.CharField(max_length=10, choices=Speaker.choices)
    message_type = models.CharField(max_length=20, choices=Type.choices, default=Type.TEXT)
    content = models.TextField(blank=True)
    # The assistant's raw output with markers (A5), kept beside the cleaned content.
    raw_content = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.COMPLETE)
    created_at = models.DateTimeField(db_index=True)
    # The user's local clock when the line was said (R7): day key, hour, period of day.
    local_day_key = models.CharField(max_length=10, blank=True)
    local_hour = models.PositiveSmallIntegerField(null=True, blank=True)
    period = models.CharField(max_length=16, blank=True)
    tz = models.CharField(max_length=64, blank=True)
    source_id = models.CharField(max_length=128, blank=True)
    sync_status = models.CharField(max_length=32, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    attachment = models.JSONField(null=True, blank=True)
    # Legacy identity (A6): the KV key it came from and strHash(profile|content).
    legacy_key = models.CharField(max_length=300, blank=True)
    content_hash = models.CharField(max_length=8, blank=True)
    # Legacy value fields with no column of their own (e.g. conversation_id), kept for export.
    legacy_extra = models.JSONField(default=dict, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
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

    def hide(self, *, at=None) -> bool:
        """Soft delete (D1 "hide"): flag it and drop it from the recall index, in one transaction."""
        from memory.deletion import hide_message

        return hide_message(self, at=at)

    def unhide(self) -> bool:
        """Undo `hide`: clear the flag and put it back in the recall index."""
        from memory.deletion import unhide_message

        return unhide_message(self)

    def refs(self) -> list[dict]:
        """What points at this message: highlights, favourites, experiences, their relations (D1)."""
        from memory.deletion import message_refs

        return message_refs(self)

    def hard_delete(self, *, force: bool = False):
        """Delete for good (D2); refused with `HasRefs` unless forced; returns what it tombstoned."""
        from memory.deletion import hard_delete_message

        return hard_delete_message(self, force=force)


__all__ = [
    "DEFAULT_PROFILE_KEY",
    "Message",
    "Profile",
    "Slice",
    "SliceLogEntry",
    "validate_profile_key",
]
