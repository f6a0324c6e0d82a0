"""Off the record (SPEC P5): a conversation shown on one page and kept nowhere else.

Its lines live in an `OffRecord` held by the page's socket (previously/chat/consumers.py) and
go with it: the End button, closing the page, reloading it or a dropped connection end it, and
there is nothing to resync from. Nothing of it is archived (no message, no slice, no
favourite, no prompt trace), so nothing recalls, evolves, refers to or exports it; no analyzer
or Previously Agent runs after its replies, and no log line holds its text.

The model gets what a reply always gets (the persona, the card, recall of the archived past)
with this conversation's own lines as the turns before the new one (`turn.generate`).
"""

import asyncio
import logging
from dataclasses import dataclass, field

from django.utils import timezone
from django.utils.translation import gettext_lazy

from memory.card.store import refresh_injected_card
from memory.models import Message, Profile, Slice
from previously.chat import guard, markdown
from previously.chat.db import db_call
from previously.chat.turn import (
    RECENT_TURNS,
    BadFrame,
    Send,
    UserFrame,
    generate,
    notice,
    refused_frame,
    render,
)

log = logging.getLogger(__name__)
LIST_ID = "off-messages"  # the page's list for these lines (templates/chat/chat.html#off_record)
KEPT_LINES = RECENT_TURNS + 2  # what a reply and a regenerate need; older lines live on the page only


@dataclass
class OffRecord:
    """One off-the-record conversation of one socket: its lines, newest last, in memory only."""

    lines: list[Message] = field(default_factory=list)
    slice: Slice | None = None  # unsaved: the card frozen for this conversation, as a slice's is (K9)
    ended: bool = False
    stop: asyncio.Event | None = None  # the reply in flight's stop (U2), so ending it stops it

    def end(self) -> None:
        self.ended = True
        self.lines.clear()
        if self.stop is not None:
            self.stop.set()

    def context(self, before: int | None = None) -> list[Message]:
        """The turns replayed to the model: finished text lines, as the archive's replay is."""
        lines = self.lines if before is None else self.lines[:before]
        done = [m for m in lines if m.status == Message.Status.COMPLETE and m.message_type == Message.Type.TEXT]
        return done[-RECENT_TURNS:]

    def keep(self, *messages: Message) -> None:
        self.lines.extend(messages)
        del self.lines[:-KEPT_LINES]


def started(profile: Profile) -> str:
    """The page's off-the-record region, on."""
    return render("off_record", on=True, oob="true", lang=profile.language)


def ended(profile: Profile, *, lost: bool = False) -> str:
    """The region off again (its lines go with it), and a notice saying nothing was kept;
    `lost`: it had ended already (a dropped connection or a reload), and the line was not sent."""
    said = (
        gettext_lazy("This off-the-record conversation had already ended (the connection was reset), so that line was not sent. Nothing of it was kept.")
        if lost else gettext_lazy("Off the record ended. Nothing of it was kept.")
    )
    return render("off_record", on=False, oob="true", lang=profile.language) + notice(
        said, level="info", lang=profile.language,
    )


@db_call
def _conversation_slice(profile: Profile, tz: str | None) -> Slice:
    """An unsaved slice for the conversation, with the card as the prompt shows it (read only)."""
    now = timezone.now()
    slice_ = Slice(profile=profile, started_at=now, last_message_at=now, tz=tz or "")
    try:
        refresh_injected_card(slice_, now=now, reason="")  # an unsaved slice: nothing is written
    except Exception:  # noqa: BLE001 - the reply goes on without the card
        log.warning("no card for an off-the-record conversation of profile %s", profile.pk, exc_info=True)
        slice_.injected_card = ""
    return slice_


def _line(message: Message, profile: Profile, **context) -> str:
    return render("off_line", message=message, lang=profile.language, **context)


async def handle_send(profile: Profile, data: dict, send: Send, *, off: OffRecord, stop: asyncio.Event | None = None) -> None:
    """A line said off the record: shown, answered, kept in `off` only."""
    if off.ended:
        return
    try:
        frame = UserFrame.parse(data)
    except BadFrame as exc:
        await send(refused_frame(exc, data, lang=profile.language))
        return
    if off.slice is None:
        off.slice = await _conversation_slice(profile, frame.tz)
    line = Message(
        profile=profile, slice=off.slice, mid=frame.mid, speaker=Message.Speaker.USER, content=frame.text,
        created_at=timezone.now(), tz=frame.tz or "",
    )
    await send(_line(line, profile, oob="true"))
    context = off.context()
    await _answer(profile, line, context, send, off, stop=stop, local_time=frame.local_time)


async def handle_regenerate(profile: Profile, data: dict, send: Send, *, off: OffRecord,
                            stop: asyncio.Event | None = None) -> None:
    """A new answer to the last line, in place of the last reply (nothing keeps the old one)."""
    if off.ended:
        return
    mid = str(data.get("mid") or "")
    lines = off.lines
    if len(lines) < 2 or lines[-1].mid != mid or lines[-1].speaker != Message.Speaker.ASSISTANT \
            or lines[-2].speaker != Message.Speaker.USER:
        await send(notice(gettext_lazy("Only the last reply can be regenerated."), lang=profile.language))
        return
    lines.pop()
    line = lines.pop()
    await send(render("gone", target=f"msg-{mid}"))
    await _answer(profile, line, off.context(), send, off, stop=stop)


async def _answer(profile: Profile, line: Message, context: list[Message], send: Send, off: OffRecord, *,
                  stop: asyncio.Event | None, local_time: str | None = None) -> None:
    stop = stop or asyncio.Event()
    off.stop = stop

    async def shown(html: str) -> None:
        if not off.ended:  # ended meanwhile: nothing more reaches the page
            await send(html)

    try:
        made = await generate(profile, line, shown, local_time=local_time, stop=stop, recent=context,
                              list_id=LIST_ID, kept=False)
    except Exception as exc:
        # Said here, not by the consumer ("it is saved if it was shown" is not true here); the log
        # names the failure's kind only: an exception's message may quote the line.
        log.error("off-the-record reply to %s failed: %s", line.mid, exc.__class__.__name__)
        await shown(render("gone", target=f"reply-{line.mid}") + notice(
            gettext_lazy("Something went wrong with that line; nothing of it was kept."), lang=profile.language))
        return
    finally:
        off.stop = None
    await guard.reply_archived()  # S3: nothing to archive; the profile may start its next turn now
    if off.ended:
        return
    reply = made.unsaved(line)
    off.keep(line, reply)
    # Rendered off the loop (issue 24 point 4) and, unlike an archived line's, not cached.
    html = await asyncio.to_thread(markdown.display_html, reply.content, cache=False)
    await shown(_line(reply, profile, oob=f"outerHTML:#reply-{line.mid}", error=made.error, line_html=html))
