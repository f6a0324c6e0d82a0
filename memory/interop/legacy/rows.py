"""The rows the plan decides to write for the two big tables: plain named records with the
model's column names, built straight from the dump and inserted without model instances."""

from dataclasses import dataclass
from datetime import datetime

from memory.models import LegacyFragment, Message


@dataclass(slots=True)
class MessageRow:
    """One memory_message row (`Message` columns)."""

    mid: str
    speaker: str
    content: str
    created_at: datetime
    legacy_key: str
    content_hash: str
    legacy_extra: dict
    message_type: str = Message.Type.TEXT
    raw_content: str = ""
    status: str = Message.Status.COMPLETE
    local_day_key: str = ""
    local_hour: int | None = None
    period: str = ""
    tz: str = ""
    source_id: str = ""
    sync_status: str = ""
    deleted_at: datetime | None = None
    reviewed_at: datetime | None = None  # D4: an admin reviewed a historic soft delete
    reply_of_id: int | None = None  # U2: the user line a reply answers (live chat only)
    prompt_trace: dict | None = None  # U4: what a live reply's prompt held
    attachment: dict | None = None
    profile_id: int | None = None
    slice_id: int | None = None
    pk: int | None = None


@dataclass(slots=True)
class FragmentRow:
    """One memory_legacyfragment row (`LegacyFragment` columns) and the mid of its message."""

    key: str
    role: str
    content: str
    ts: int
    day_key: str
    hour: int | None
    period: str
    fingerprint: str
    legacy_extra: dict
    disposition: str = LegacyFragment.Disposition.OWN
    mid: str | None = None  # the message it belongs to; resolved to message_id on write
    profile_id: int | None = None
    message_id: int | None = None


@dataclass(slots=True)
class Twin:
    """A msg: record waiting for the mem: fragment of the same line (rule 1)."""

    at_ms: int
    mid: str
    tombstoned: bool
    claims: int = 0
