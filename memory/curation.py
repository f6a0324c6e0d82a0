"""Highlights (SPEC C1, C2): the one way a highlight is made, by a user favourite or a marker."""

import logging
import secrets
from collections.abc import Iterable

from django.conf import settings
from django.utils import timezone

from memory.models import Highlight, Message, Profile

log = logging.getLogger(__name__)


class HighlightRefused(Exception):
    """The quote is not verbatim in any message it may come from (C1, `STRICT_MID`)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def new_hid() -> str:
    return f"h_{int(timezone.now().timestamp() * 1000)}_{secrets.token_hex(3)}"


def add_highlight(
    *,
    profile: Profile,
    text: str,
    source: str,
    message: Message | None = None,
    candidates: Iterable[Message] = (),
) -> Highlight:
    """Store `text` as a highlight of `message` (or of the newest of `candidates` quoting it).

    The text must occur verbatim in that live message of this profile when STRICT_MID is on
    (the default); otherwise HighlightRefused says why. The same quote of the same message
    returns the existing highlight.
    """
    text = text.strip()
    if not text:
        raise HighlightRefused("the quote is empty")
    pool = [message] if message is not None else list(candidates)
    pool = [m for m in pool if m.profile_id == profile.pk and m.deleted_at is None]
    if not pool:
        raise HighlightRefused("no live message of this profile to quote")
    quoted = [m for m in pool if text in m.content]
    if quoted:
        source_message = max(quoted, key=lambda m: (m.created_at, m.pk))
    elif settings.STRICT_MID:
        raise HighlightRefused(f"the text does not occur verbatim in {'message ' + pool[0].mid if message else 'the conversation'}")
    else:
        source_message = max(pool, key=lambda m: (m.created_at, m.pk))
    existing = Highlight.objects.live().filter(profile=profile, message=source_message, content=text).first()
    if existing is not None:
        return existing
    return Highlight.objects.create(
        profile=profile,
        hid=new_hid(),
        message=source_message,
        mid=source_message.mid,
        content=text,
        source=source,
        created_at=timezone.now(),
    )
