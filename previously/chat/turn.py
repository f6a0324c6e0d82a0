"""The turn (DESIGN "The turn"): archive → recall → prompt → stream → archive → markers.

The consumer only parses frames and hands them here with a `send(html)` coroutine;
every frame sent is a rendered partial of templates/chat/chat.html swapped out-of-band by htmx.
Database work runs in the small sync helpers below, through `db_call` (previously/chat/db.py).
"""

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime

from asgiref.sync import async_to_sync
from django.db import DatabaseError, transaction
from django.tasks import task
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.text import format_lazy
from django.utils.translation import gettext, gettext_lazy, pgettext

from memory import limits, markers
from memory.archive import Archived, MidConflict, MidTombstoned, archive_message
from memory.card.store import injected_card_for, refresh_injected_card
from memory.clock import LocalClock, local_clock
from memory.curation import HighlightRefused, add_highlight, contradictions
from memory.deletion import hide_message, unhide_message
from memory.lorebook import matching_entries
from memory.models import Card, Highlight, Message, Profile, Slice
from memory.models.archive import USER_MID_RE
from memory.recall import recall, vectors
from memory.recall.budget import approx_tokens
from memory.recall.context import Recalled
from previously.agent.briefing import arrival_briefing
from previously.agent.lifecycle import after_reply, archive_line
from previously.chat import guard, markdown, prompt, steps
from previously.chat.db import after_the_reply, db_call
from previously.i18n import for_profile
from previously.llm import Provider, ProviderError, gate
from previously.llm.openai_compat import TOO_LONG
from previously.llm.select import context_tokens, known_context_tokens, output_cap, provider_for
from previously.push import apush

log = logging.getLogger(__name__)

Send = Callable[[str], Awaitable[None]]
RECENT_TURNS = 12  # messages of the current slice replayed as chat turns (bounded, O2)
# A streamed reply's words go to the page at most this often (s): the first at once, the rest
# gathered meanwhile. A model streams a chunk per token, and each chunk was a frame of its own,
# a render and a websocket send on the event loop: at 100 tokens a second, 100 frames; now at
# most 20 (issue 24 point 11, BENCH §4: `make loadtest LOADTEST_ARGS="--chunks 100 --chunk-gap 0.01"`).
TOKEN_FRAME_SECONDS = 0.05
SAVE_RETRY_SECONDS = [2.0, 15.0, 60.0]  # A3: when an unsaved line (and its reply) is tried again
BACKGROUND_TURN_WAIT = 120.0  # seconds a no-JS image reply waits for a turn in flight (S3)


class BadFrame(ValueError):
    """The browser sent something we cannot take; the message says what. `give_back`: the
    line's text goes back into the composer (refused, not lost)."""

    def __init__(self, message, *, give_back: bool = False):
        super().__init__(message)
        self.give_back = give_back


@dataclass(frozen=True)
class UserFrame:
    mid: str
    text: str
    local_time: str | None
    tz: str | None

    @classmethod
    def parse(cls, data: dict) -> "UserFrame":
        mid = str(data.get("mid") or "")
        text = str(data.get("text") or "")
        if not USER_MID_RE.fullmatch(mid):
            raise BadFrame(gettext_lazy("invalid message id: expected c_ and 16 hex digits"))
        if not text.strip():
            raise BadFrame(gettext_lazy("empty message"))
        if limits.MESSAGE.exceeded_by(text):  # S6: said in the profile's language when the notice renders
            too_long = limits.TextTooLong(limit=limits.MESSAGE, length=len(text))
            raise BadFrame(lazy(too_long.message, str)(), give_back=True)
        return cls(mid=mid, text=text, local_time=data.get("local_time") or None, tz=data.get("tz") or None)


@dataclass
class Prepared:
    profile: Profile
    slice: Slice
    clock: LocalClock
    recalled: Recalled
    messages: list[dict]  # the provider request
    trace: dict  # U4: what the request holds, as ids and token counts (never text)


def assistant_mid() -> str:
    """SPEC A2: a_<epoch ms>_<short id>."""
    return f"a_{int(timezone.now().timestamp() * 1000)}_{secrets.token_hex(4)}"


# --- rendering ---------------------------------------------------------------------------

def render(partial: str, **context) -> str:
    return render_to_string(f"chat/chat.html#{partial}", context)


def mark_alternatives(messages: list[Message]) -> None:
    """U2: each reply learns its place among the replies of its user line ("2 / 3") and the
    mids of its neighbours, in one query (sync)."""
    lines = [m for m in messages if m.speaker == Message.Speaker.ASSISTANT and m.reply_of_id]
    for m in messages:
        m.alt_index = m.alt_total = 0
        m.alt_prev = m.alt_next = ""
    if not lines:
        return
    groups: dict[int, list[str]] = {}
    for reply_of, mid in Message.objects.replies_to({m.reply_of_id for m in lines}):
        groups.setdefault(reply_of, []).append(mid)
    for m in lines:
        mids = groups.get(m.reply_of_id, [])
        if len(mids) > 1 and m.mid in mids:
            i = mids.index(m.mid)
            m.alt_index, m.alt_total = i + 1, len(mids)
            m.alt_prev = mids[i - 1] if i > 0 else ""
            m.alt_next = mids[i + 1] if i + 1 < len(mids) else ""


def render_message(
    message: Message, *, lang: str, oob: str = "true", notice: str = "", reply_to: str = "", error: str = "",
    profile: Profile | None = None,
) -> str:
    """One line as the page shows it; with `profile`, its menu of curation actions (point 5)."""
    can_retry = message.status == Message.Status.FAILED and bool(reply_to)
    if not hasattr(message, "alt_total"):
        message.alt_total = 0
    return render(
        "message", message=message, lang=lang, oob=oob, notice=notice, reply_to=reply_to,
        can_retry=can_retry, error=error, profile=profile,
    )


def notice(text: str, *, level: str = "error", lang: str | None = None) -> str:
    """A notice line; a lazy `text` is translated in `lang`, the profile's language."""
    return render("notice", text=text, level=level, lang=lang)


def refused_frame(exc: BadFrame, data: dict, *, lang: str) -> str:
    """The notice for a line the page sent that cannot be taken; its text back when it is given back."""
    back = render("busy", mid=str(data.get("mid") or ""), text=str(data.get("text") or "")) if exc.give_back else ""
    return back + notice(exc.args[0], lang=lang)


# --- database helpers (sync) -----------------------------------------------------------------

@db_call
def _archive_user(profile: Profile, frame: UserFrame) -> tuple[Archived, Future | None]:
    """The line archived, and for a line new to the archive the request for its reply
    (`_request_ahead`), in one database call: one wait for the chat's database threads and the
    event loop between them, not two; the line is echoed after it (BENCH §4). `make loadtest`,
    two-processes+redis+pg, 4 interleaved pairs: the server's p99 from frame to first token
    145.2 -> 130.3 ms (lower in every pair), the added first-token delay p99 98.8 -> 84.9 ms."""
    # A slice this line closes is snapshotted now; its evolution run is queued (K8, K10).
    archived = archive_line(
        archive_message, profile=profile, mid=frame.mid, speaker=Message.Speaker.USER,
        content=frame.text, tz=frame.tz, local_time=frame.local_time,
    )
    steps.step("archived")
    if not archived.created:
        return archived, None  # a resend: its reply may be stored already (`handle_send`)
    return archived, _request_ahead(profile, archived.message, local_time=frame.local_time)


@db_call
def _after_reply(profile: Profile, slice_: Slice, user_text: str, reply_text: str) -> None:
    """K10 housekeeping after the reply was delivered; a failure here never touches the chat."""
    try:
        after_reply(profile, slice_, user_text, reply_text)
    except Exception:
        log.exception("turn analyzer failed after a reply in slice %s", slice_.pk)


@db_call
def _reply_after(user_message: Message) -> Message | None:
    """The reply that already follows this user message in its slice, if any (resends)."""
    after = (
        Message.objects.live()
        .in_slice(user_message.slice_id)
        .filter(created_at__gte=user_message.created_at)
        .exclude(pk=user_message.pk)
        .order_by("created_at", "id")
        .first()
    )
    return after if after is not None and after.speaker == Message.Speaker.ASSISTANT else None


@db_call
def _user_message(profile: Profile, mid: str) -> Message | None:
    return (
        Message.objects.for_profile(profile).live()
        .filter(mid=mid, speaker=Message.Speaker.USER).select_related("slice").first()
    )


def _recent_turns(user_message: Message) -> list[Message]:
    """The turns before `user_message` in its slice replayed to the model, oldest first."""
    return Message.objects.turns_before(user_message, limit=RECENT_TURNS)[::-1]


def _reread(profile: Profile) -> Profile:
    """A copy of `profile` with name, persona and language as stored now."""
    return Profile.objects.reread(profile)


def prepare(
    profile: Profile, user_message: Message, *, local_time: str | None = None, now: datetime | None = None,
    images: bool = False, recent: list[Message] | None = None, offline: bool = False, reread: bool = True,
) -> Prepared:
    """Recall and the provider request for a reply to `user_message` (constant queries, O2).
    `recent`: the turns to replay instead of the slice's (an off-the-record conversation's
    unsaved lines, P5); recall still searches the archive only. `offline`: no model will read
    the request, and what is recalled is what the offline answer quotes (L2, `offline_reply`):
    the current conversation may be quoted too, only the question itself is left out.
    `reread=False`: `profile` was read just now."""
    if reread:
        profile = _reread(profile)  # persona/language may have changed
    # The archive write hands back its message with the slice attached: no query then.
    slice_ = user_message.slice
    clock = local_clock(now or timezone.now(), user_message.tz or None, local_time)
    if recent is None:
        recent = _recent_turns(user_message)
    left_out = [user_message] if offline else [user_message, *recent]
    recalled = recall(
        profile=profile,
        query=user_message.content or prompt.turn_text(user_message),
        now=clock.local,
        exclude_ids=[m.pk for m in left_out if m.pk is not None],
        lore=matching_entries(profile.pk, [*(m.content for m in recent), user_message.content]),
    )
    conflicts = contradictions([*recalled.active, *recalled.candidates])
    messages = prompt.chat_messages(
        profile=profile,
        slice_=slice_,
        card_text=injected_card_for(slice_, now=clock.local),
        # K14 only on the slice's first reply; a slice with a reply already needs no look.
        briefing=None if any(m.speaker == Message.Speaker.ASSISTANT for m in recent)
        else arrival_briefing(profile, slice_, now=clock.local),
        clock=clock,
        recalled=recalled,
        recent=recent,
        user_text=user_message.content,
        user_content=prompt.user_turn_content(user_message, images=images),
        conflicts=conflicts,
    )
    trace = prompt_trace(
        profile, recalled, messages, card_text=slice_.injected_card or "", recent=recent, conflicts=conflicts
    )
    return Prepared(profile=profile, slice=slice_, clock=clock, recalled=recalled, messages=messages, trace=trace)


def prompt_trace(
    profile: Profile, recalled: Recalled, messages: list[dict], *, card_text: str, recent: list[Message],
    conflicts: Sequence[tuple] = (),
) -> dict:
    """U4 "why this reply": the ids of what the prompt quoted and the approximate tokens of each
    part (memory/recall/budget.py's count), the card's version; no text is kept."""
    sections = prompt.memory_sections(profile, recalled, conflicts=conflicts)

    def tokens(content) -> int:
        if isinstance(content, list):  # an image turn: its text part (the image is not counted)
            return sum(approx_tokens(part.get("text", "")) for part in content if part.get("type") == "text")
        return approx_tokens(content or "")

    counts = {
        "card": approx_tokens(card_text),
        "recalled": approx_tokens(sections["recalled"]),
        "highlights": approx_tokens(sections["highlights"]),
        "experiences": sum(approx_tokens(sections[part]) for part in ("active", "candidates", "disputed")),
        "lore": approx_tokens(sections["lore"]),
        "system": tokens(messages[0]["content"]),
        "recent": sum(tokens(m["content"]) for m in messages[1:-1]),
        "user": tokens(messages[-1]["content"]),
    }
    counts["total"] = counts["system"] + counts["recent"] + counts["user"]
    return {
        "recalled": [m.pk for m in recalled.fragments],
        "highlights": [h.pk for h in recalled.highlights],
        "experiences": [e.pk for e in [*recalled.active, *recalled.candidates]],
        "lore": [e.pk for e in recalled.lore],
        "card_version": Card.objects.version_of(profile.pk),
        "recent": len(recent),
        "tokens": counts,
    }


def store_reply(
    profile: Profile, user_message: Message, *, mid: str, raw: str, content: str, favs: list[str],
    status: str, message_type: str = Message.Type.TEXT, trace: dict | None = None, end_turn: bool = False,
) -> tuple[Message, list[Highlight]]:
    """Archive the cleaned reply and act on its [[fav:]] markers (A5, C2); link it to its user
    line (U2) with its prompt trace (U4). One transaction, so one wait for SQLite's write lock;
    with `end_turn` it also releases the profile's turn lease (S3: the lease ends when the reply
    is saved)."""
    saved_line = user_message.pk is not None
    with transaction.atomic():
        reply = archive_message(
            profile=profile, mid=mid, speaker=Message.Speaker.ASSISTANT, content=content,
            raw_content=raw if raw != content else "", status=status, message_type=message_type,
            tz=user_message.tz or None, reply_of=user_message if saved_line else None,
            prompt_trace=trace if saved_line else None,
        ).message
        if end_turn:
            guard.release_turn(profile)
    highlights = []
    if favs:
        conversation = list(
            Message.objects.live().in_slice(reply.slice_id).order_by("-created_at", "-id")[: RECENT_TURNS * 2]
        )
        for text in favs:
            try:
                highlights.append(
                    add_highlight(profile=profile, text=text, source=Highlight.Source.ASSISTANT, candidates=conversation)
                )
            except HighlightRefused as refused:
                log.info("ignored [[fav:]] marker of %s: %s", mid, refused.reason)
    return reply, highlights


@db_call
def _store_reply_marked(profile: Profile, user_message: Message, **reply) -> Message:
    """`store_reply`, and the stored reply's place among its line's replies (`mark_alternatives`)
    for the page, in one database call: one wait on the chat's database thread, not two. The
    reply is stored once `store_reply` returns: a failure to read its alternatives after that
    only leaves the page without "2 / 3" until it reloads, never says the reply was not saved."""
    stored, _ = store_reply(profile, user_message, **reply)
    try:
        mark_alternatives([stored])
    except DatabaseError:
        log.warning("reading the alternatives of reply %s failed; it is stored", stored.mid, exc_info=True)
    return stored


def offline_reply(profile: Profile, recalled: Recalled, *, kept: bool = True) -> str:
    """L2: an answer quoting remembered lines with their dates, clearly not from a model: the
    first of what `prepare(..., offline=True)` recalled, which may be of the current
    conversation too (only the question itself is left out). `kept=False`: the line is off the
    record (P5), so the answer does not say it is saved."""
    lines = recalled.fragments[:3]
    with for_profile(profile):
        if not lines and not kept:
            return gettext(
                "Offline — no model configured. Nothing is kept off the record; I found nothing related in your memory."
            )
        if not lines:
            return gettext(
                "Offline — no model configured. Your message is saved; I found nothing related in your memory yet."
            )
        head = gettext("Offline — no model configured. From your memory:")
        who = {
            Message.Speaker.USER: pgettext("speaker quoted in an offline reply", "you"),
            Message.Speaker.ASSISTANT: pgettext("speaker quoted in an offline reply", "companion"),
        }
        quoted = [
            gettext("· %(day)s, %(speaker)s: “%(content)s”") % {
                "day": m.local_day_key or m.created_at.date().isoformat(),
                "speaker": who.get(m.speaker, m.speaker), "content": m.content,
            }
            for m in lines
        ]
    return "\n".join([head, *quoted])


# --- the turn (async) ------------------------------------------------------------------------

# The vector passes under way (`line_vector`), by the line's text.
_VECTORS: dict[str, asyncio.Future] = {}


def line_vector(text: str) -> asyncio.Future:
    """The pass that makes the sentence vector of a line about to be archived, in a thread of its
    own, so the archive write finds it cached: on the chat's one database thread (SQLite) every
    other chat's calls waited behind the model's forward pass (issue 24 point 11: an eighth of
    that thread's time). One pass per text at a time: a turn awaits the one its frame began."""
    ahead = _VECTORS.get(text)
    if ahead is None or ahead.get_loop() is not asyncio.get_running_loop():  # a closed loop's (tests) is never awaited
        ahead = _VECTORS[text] = asyncio.ensure_future(asyncio.to_thread(vectors.embed_ahead, [text]))
        ahead.add_done_callback(lambda _: _VECTORS.pop(text, None))
    return ahead


def vector_ahead(data: dict) -> None:
    """Begin the vector of the line a "send" frame carries as the frame arrives, so it is made
    while the socket checks the session and takes the turn's lease (BENCH §4: on PostgreSQL
    those round trips and the model's pass took ~3 and ~2 ms one after the other)."""
    if (data.get("action") or "send") != "send":
        return
    try:
        frame = UserFrame.parse(data)
    except BadFrame:
        return  # refused by the turn itself, with its notice
    line_vector(frame.text)


async def handle_send(profile: Profile, data: dict, send: Send, *, stop: asyncio.Event | None = None) -> None:
    """A user message from the page: archive it (idempotent by mid), then reply."""
    lang = profile.language
    try:
        frame = UserFrame.parse(data)
    except BadFrame as exc:
        await send(refused_frame(exc, data, lang=lang))
        return
    await line_vector(frame.text)  # begun as the frame arrived (`vector_ahead`)
    steps.step("vector")
    try:
        archived, ahead = await _archive_user(profile, frame)
    except MidTombstoned as exc:
        await send(render("gone", target=f"msg-{frame.mid}") + notice(format_lazy(
            gettext_lazy("{mid} was deleted for good; it is not stored again."), mid=exc.mid
        ), lang=lang))
        return
    except MidConflict as exc:
        await send(render("gone", target=f"msg-{frame.mid}") + notice(format_lazy(
            gettext_lazy("mid_conflict: {mid} is already stored with different text; nothing was changed."), mid=exc.mid
        ), lang=lang))
        return
    except Exception:
        # A3: the chat goes on — the reply comes with a notice, and the line is saved later.
        log.exception("archiving user message %s failed", frame.mid)
        await unsaved_turn(profile, frame, send)
        return
    user_message = archived.message
    await send(render_message(user_message, profile=profile, lang=lang))
    steps.step("echoed")
    if not archived.created:
        existing = await _reply_after(user_message)
        if existing is not None:  # a resend after a reconnect: show what is stored, write nothing
            await markdown.warm([existing.content])  # issue 24 point 4: rendered off the loop
            await send(render_message(existing, profile=profile, lang=lang, reply_to=user_message.mid))
            return
    await reply_to(profile, user_message, send, local_time=frame.local_time, stop=stop, ahead=ahead)


RESYNC_MAX = 200  # lines sent back on one (re)connect; the page's "load older" covers the rest


@db_call
def _lines_after(profile: Profile, mid: str) -> list[Message]:
    # An unknown mid gives nothing, rather than the whole archive.
    return list(Message.objects.for_profile(profile).live().page_from(mid, newer=True)[:RESYNC_MAX])


async def handle_resync(profile: Profile, data: dict, send: Send) -> None:
    """After a (re)connect the page names the last line it shows; send what came after it
    (archived while it was away: another tab, a reply that finished during a Redis or network
    outage). Each line swaps in by id, so a line already shown is replaced, never doubled."""
    after = str(data.get("after") or "")
    lines = await _lines_after(profile, after) if after else []
    await markdown.warm([m.content for m in lines if m.speaker == Message.Speaker.ASSISTANT])  # off the loop
    for message in lines:
        await send(render_message(message, profile=profile, lang=profile.language))


async def handle_reply(profile: Profile, data: dict, send: Send, *, stop: asyncio.Event | None = None) -> None:
    """A reply to a line already archived over HTTP (an image upload, A7): once per line."""
    user_message = await _user_message(profile, str(data.get("mid") or ""))
    if user_message is None:
        await send(notice(gettext_lazy("That message is no longer in the archive."), lang=profile.language))
        return
    lang = profile.language
    await send(render_message(user_message, profile=profile, lang=lang))
    existing = await _reply_after(user_message)
    if existing is not None:  # a resend: show what is stored, write nothing
        await markdown.warm([existing.content])  # issue 24 point 4: rendered off the loop
        await send(render_message(existing, profile=profile, lang=lang, reply_to=user_message.mid))
        return
    await reply_to(profile, user_message, send, local_time=data.get("local_time") or None, stop=stop)


@task()
def reply_in_background(profile_id: int, mid: str) -> None:
    """The reply to a line archived over plain HTTP (an image sent without JavaScript, A7): the
    normal turn, its frames pushed to the profile's open pages; archived for the next load."""
    profile = Profile.objects.filter(pk=profile_id).first()
    if profile is None:
        return

    async def send(html: str) -> None:
        await apush(profile, html)

    # One turn per profile (S3), as on the socket: wait a little for a reply in flight in a tab
    # to finish; if it does not, the image stays archived and the next message continues from it.
    deadline = time.monotonic() + BACKGROUND_TURN_WAIT
    while not guard.take_turn(profile):
        if time.monotonic() >= deadline:
            log.info("profile %s busy for %ss; no reply to %s", profile_id, BACKGROUND_TURN_WAIT, mid)
            async_to_sync(send)(notice(
                gettext_lazy("Your companion was busy with another reply, so your image got no answer of its own. It is saved; your next message continues from it."),
                lang=profile.language))
            return
        time.sleep(0.5)

    async def reply() -> None:
        keeper = asyncio.create_task(guard.keep_turn(profile, db_call(guard.renew_turn)))
        try:
            await handle_reply(profile, {"mid": mid}, send)
        finally:
            keeper.cancel()

    try:
        async_to_sync(reply)()
    finally:
        guard.release_turn(profile)


async def handle_retry(profile: Profile, data: dict, send: Send, *, stop: asyncio.Event | None = None) -> None:
    """A new reply attempt for a user message whose reply failed (L3)."""
    user_message = await _user_message(profile, str(data.get("mid") or ""))
    if user_message is None:
        await send(notice(gettext_lazy("That message is no longer in the archive."), lang=profile.language))
        return
    if data.get("failed"):
        await send(render("gone", target=f"retry-{data['failed']}"))
    await reply_to(profile, user_message, send, stop=stop)


async def _stream(provider, messages: list[dict], cleaner: markers.StreamCleaner, send: Send, umid: str,
                  stop: asyncio.Event, prompt_tokens: int = 0) -> bool:
    """Stream the model's reply into the page until it ends or `stop` is set (U2). A stop
    cancels the pending read at once (the HTTP stream to the model is closed), so the model call
    ends within the time of one loop turn, not at the next chunk. True when stopped. The first
    words go out as they come, later ones at most every TOKEN_FRAME_SECONDS. Background model
    calls of this process wait or give way meanwhile (previously.llm.gate)."""
    with gate.turn():
        return await _stream_reply(provider, messages, cleaner, send, umid, stop, prompt_tokens)


async def _stream_reply(provider, messages: list[dict], cleaner: markers.StreamCleaner, send: Send, umid: str,
                        stop: asyncio.Event, prompt_tokens: int) -> bool:
    # A prompt (U4's count) that cannot fit the model's known window is told, not sent (issue 26).
    known, window = known_context_tokens(provider)
    if not known:
        window = await asyncio.to_thread(context_tokens, provider)
    if window and prompt_tokens + output_cap("reply") > window:
        raise ProviderError(f"the prompt ({prompt_tokens} tokens) and the reply's cap do not fit the model's window "
                            f"of {window} tokens (PREVIOUSLY_MODEL_CONTEXT_TOKENS)", notice=TOO_LONG)
    stream = provider.astream(messages, max_tokens=output_cap("reply"))
    stopping = asyncio.ensure_future(stop.wait())
    loop = asyncio.get_running_loop()
    held, sent_at = "", None  # text not on the page yet; when the last token frame went out

    async def send_held() -> None:
        nonlocal held, sent_at
        steps.step("model")
        await send(render("token", umid=umid, text=held))
        steps.first_token()
        held, sent_at = "", loop.time()

    try:
        while True:
            chunk = asyncio.ensure_future(anext(stream))
            while True:
                # Held words wait for the next chunk only until their frame is due: a model
                # that pauses mid-reply never keeps what it already said off the page.
                due = max(0.0, sent_at + TOKEN_FRAME_SECONDS - loop.time()) if held else None
                done, _ = await asyncio.wait({chunk, stopping}, timeout=due, return_when=asyncio.FIRST_COMPLETED)
                if done:
                    break
                await send_held()
            if not chunk.done():
                chunk.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await chunk
                return True
            try:
                text = chunk.result()
            except StopAsyncIteration:
                if held:
                    await send_held()
                return False
            held += cleaner.feed(text)
            if held and (sent_at is None or loop.time() - sent_at >= TOKEN_FRAME_SECONDS):
                await send_held()
    finally:
        stopping.cancel()
        with contextlib.suppress(Exception):
            await stream.aclose()


# --- regenerate, choose an alternative, edit and resend (U2) ------------------------------

class Refused(ValueError):
    """A regenerate/choose/edit the archive does not allow; the message says why."""


def _latest_live(profile: Profile) -> Message | None:
    return Message.objects.for_profile(profile).live().order_by("-created_at", "-id").select_related("slice").first()


@db_call
def _prepare_regenerate(profile: Profile, mid: str) -> tuple[Message, Message]:
    """The last reply (hidden now: kept as an alternative) and the user line it answers."""
    reply = _latest_live(profile)
    if reply is None or reply.mid != mid or reply.speaker != Message.Speaker.ASSISTANT:
        raise Refused(gettext_lazy("Only the last reply can be regenerated."))
    user_line = reply.reply_of
    # An imported or older reply, or a card's greeting (whose "line" is the first greeting):
    # the person's line just before it.
    if user_line is None or user_line.speaker != Message.Speaker.USER:
        user_line = (
            Message.objects.for_profile(profile).in_slice(reply.slice_id)
            .filter(speaker=Message.Speaker.USER, created_at__lte=reply.created_at)
            .order_by("-created_at", "-id").select_related("slice").first()
        )
    if user_line is None:
        raise Refused(gettext_lazy("That reply answers no line of yours, so it cannot be regenerated."))
    if user_line.deleted_at is not None:  # issue 24 point 9: never attach it to an earlier line
        raise Refused(gettext_lazy("The line this reply answers is hidden; restore it to regenerate the reply."))
    if reply.reply_of_id != user_line.pk:
        Message.objects.filter(pk=reply.pk).update(reply_of=user_line)
    hide_message(reply)
    return reply, user_line


async def handle_regenerate(profile: Profile, data: dict, send: Send, *, stop: asyncio.Event | None = None) -> None:
    """A new reply to the last user line; the earlier reply stays as an alternative (hidden)."""
    try:
        reply, user_line = await _prepare_regenerate(profile, str(data.get("mid") or ""))
    except Refused as refused:
        await send(notice(refused.args[0], lang=profile.language))
        return
    await send(render("gone", target=f"msg-{reply.mid}"))
    await reply_to(profile, user_line, send, stop=stop)


@db_call
def _choose(profile: Profile, shown: str, wanted: str) -> Message:
    """Show the alternative `wanted` instead of `shown`: the chosen one is the live one."""
    lines = {m.mid: m for m in Message.objects.for_profile(profile).filter(
        mid__in=[shown, wanted], speaker=Message.Speaker.ASSISTANT, reply_of__isnull=False,
    )}
    current, target = lines.get(shown), lines.get(wanted)
    if current is None or target is None or current.reply_of_id != target.reply_of_id or current.deleted_at is not None:
        raise Refused(gettext_lazy("That alternative is not one of this reply's."))
    hide_message(current)
    unhide_message(target)
    mark_alternatives([target])
    return target


async def handle_choose(profile: Profile, data: dict, send: Send) -> None:
    shown = str(data.get("shown") or "")
    try:
        target = await _choose(profile, shown, str(data.get("mid") or ""))
    except Refused as refused:
        await send(notice(refused.args[0], lang=profile.language))
        return
    await markdown.warm([target.content])  # issue 24 point 4: rendered off the loop
    await send(render_message(target, profile=profile, lang=profile.language, oob=f"outerHTML:#msg-{shown}"))


@db_call
def _replace_user_line(profile: Profile, old_mid: str, frame: UserFrame):
    """The edited text as a new line (new mid); the old line and its replies hidden, kept."""
    latest_user = (
        Message.objects.for_profile(profile).live().filter(speaker=Message.Speaker.USER)
        .order_by("-created_at", "-id").first()
    )
    if latest_user is None or latest_user.mid != old_mid:
        raise Refused(gettext_lazy("Only your last line can be edited."))
    if latest_user.message_type != Message.Type.TEXT:
        raise Refused(gettext_lazy("An image line cannot be edited; send a new one."))
    archived = archive_line(
        archive_message, profile=profile, mid=frame.mid, speaker=Message.Speaker.USER,
        content=frame.text, tz=frame.tz, local_time=frame.local_time,
    )
    gone = [latest_user.mid]
    hide_message(latest_user)
    later = Message.objects.for_profile(profile).live().filter(
        created_at__gte=latest_user.created_at, speaker=Message.Speaker.ASSISTANT,
    ).exclude(pk=archived.message.pk)
    for reply in later:
        hide_message(reply)
        gone.append(reply.mid)
    return archived, gone


async def handle_edit(profile: Profile, data: dict, send: Send, *, stop: asyncio.Event | None = None) -> None:
    """U2: edit and resend the last user line: a new line, the old one kept hidden, a new reply."""
    lang = profile.language
    try:
        frame = UserFrame.parse(data)
        archived, gone = await _replace_user_line(profile, str(data.get("edits") or ""), frame)
    except (BadFrame, Refused) as refused:
        await send(render("gone", target=f"msg-{data.get('mid') or ''}") + notice(refused.args[0], lang=lang))
        return
    except MidConflict as exc:
        await send(notice(format_lazy(
            gettext_lazy("mid_conflict: {mid} is already stored with different text; nothing was changed."), mid=exc.mid
        ), lang=lang))
        return
    await send("".join(render("gone", target=f"msg-{mid}") for mid in gone))
    await send(render_message(archived.message, profile=profile, lang=lang))
    await reply_to(profile, archived.message, send, local_time=frame.local_time, stop=stop)


@dataclass
class Generated:
    """A reply streamed into the page, not yet kept anywhere (`generate`)."""

    prepared: Prepared
    lang: str
    raw: str
    content: str
    favs: list[str]
    status: str
    kind: str
    error: str
    mid: str

    @property
    def stopped(self) -> bool:
        return self.status == Message.Status.STOPPED

    def unsaved(self, user_message: Message, *, with_raw: bool = True) -> Message:
        """The reply as an unsaved line of `user_message`'s slice."""
        return Message(
            profile=self.prepared.profile, slice=self.prepared.slice, mid=self.mid,
            speaker=Message.Speaker.ASSISTANT, content=self.content,
            raw_content=self.raw if with_raw and self.raw != self.content else "", status=self.status,
            message_type=self.kind, created_at=timezone.now(), tz=user_message.tz,
        )


def _request_for(profile: Profile, user_message: Message, *, local_time: str | None,
                 recent: list[Message] | None) -> tuple[Provider, Prepared]:
    """The companion's own model and temperature as stored now (issue 17), and the request for
    it (`prepare`), off the event loop: `provider_for` may read the stored model choice, which
    on the event loop held every socket while it ran."""
    profile = _reread(profile)
    provider = provider_for(profile)
    return provider, prepare(profile, user_message, local_time=local_time, recent=recent, reread=False,
                             images=getattr(provider, "supports_images", False), offline=provider.offline)


_provider_and_request = db_call(_request_for)


def _request_ahead(profile: Profile, user_message: Message, *, local_time: str | None) -> Future:
    """`_request_for`, made now by a database call already under way, as a done future for the
    turn to take (`generate`): its error, if any, is raised there, where it would have been
    made, never taken for the archive write's."""
    ahead = Future()
    try:
        ahead.set_result(_request_for(profile, user_message, local_time=local_time, recent=None))
    except Exception as exc:  # noqa: BLE001 - raised by `generate`, as its own call would
        ahead.set_exception(exc)
    steps.step("prepared")
    return ahead


async def generate(
    profile: Profile, user_message: Message, send: Send, *, local_time: str | None = None,
    stop: asyncio.Event | None = None, recent: list[Message] | None = None, list_id: str = "messages",
    kept: bool = True, ahead: Future | None = None,
) -> Generated:
    """Recall, prompt and stream the reply to `user_message` into the page (into the list
    `list_id`); nothing is stored here. `recent` replaces the slice's replayed turns and
    `kept=False` says the line is not kept (an off-the-record conversation, P5). `ahead`: the
    provider and request already made (`_request_ahead`)."""
    umid = user_message.mid
    if ahead is not None:
        provider, prepared = ahead.result()
    else:
        provider, prepared = await _provider_and_request(profile, user_message, local_time=local_time, recent=recent)
        steps.step("prepared")
    lang = prepared.profile.language
    await send(render("reply_start", umid=umid, lang=lang, offline=provider.offline, list_id=list_id))
    steps.step("started")
    cleaner = markers.StreamCleaner()
    error = ""
    stopped = False
    if provider.offline:
        text = await db_call(offline_reply)(prepared.profile, prepared.recalled, kept=kept)
        cleaner.feed(text)
        await send(render("token", umid=umid, text=text))
    else:
        try:
            with guard.writes_paused():  # the model's seconds: an import need not wait for them
                stopped = await _stream(
                    provider, prepared.messages, cleaner, send, umid, stop or asyncio.Event(),
                    prompt_tokens=prepared.trace["tokens"]["total"],
                )
        except ProviderError as exc:
            error = exc.notice  # in the person's language; the detail goes to the log
            log.warning("reply to %s failed: %s", umid, exc)
        except Exception as exc:  # anything else from the model path is a model failure too
            log.exception("model failure replying to %s", umid)
            error = f"the model failed: {exc.__class__.__name__}"
        rest = cleaner.finish()
        if rest and not error:
            await send(render("token", umid=umid, text=rest))
    content, favs = markers.clean(cleaner.raw)
    if error or stopped:
        favs = []  # a failed or stopped reply's markers are not acted on
    status = Message.Status.FAILED if error else Message.Status.STOPPED if stopped else Message.Status.COMPLETE
    kind = Message.Type.SYSTEM if provider.offline else Message.Type.TEXT
    return Generated(prepared=prepared, lang=lang, raw=cleaner.raw, content=content, favs=favs, status=status,
                     kind=kind, error=error, mid=assistant_mid())


async def reply_to(
    profile: Profile, user_message: Message, send: Send, *, local_time: str | None = None,
    stop: asyncio.Event | None = None, ahead: Future | None = None,
) -> Message:
    """Recall, prompt, stream the reply into the page, archive it, act on its markers.
    A reply stopped by the person (U2) is archived as far as it went, status stopped.
    `ahead`: its provider and request, made with the line's archive write (`_archive_user`)."""
    umid = user_message.mid
    made = await generate(profile, user_message, send, local_time=local_time, stop=stop, ahead=ahead)
    with after_the_reply():  # archiving it gives way to others' first tokens (BENCH §4)
        prepared, lang, content, error, mid = made.prepared, made.lang, made.content, made.error, made.mid
        status, kind, stopped = made.status, made.kind, made.stopped
        note = ""
        if user_message.pk is None:  # A3: its line is not saved yet; both are saved together later
            reply = made.unsaved(user_message)
            await guard.reply_archived()  # S3: the profile may start its next turn now
            await markdown.warm([content])  # issue 24 point 4: rendered off the loop
            await send(render_message(reply, lang=lang, oob=f"outerHTML:#reply-{umid}", notice="pending", reply_to=umid, error=error))
            return reply
        # The reply's vector too, as the user line's above: not on the database thread, and not while
        # the reply's transaction holds SQLite's write lock (every other writer, an import's batches
        # included, waited for the model's pass there: BENCH §5).
        await line_vector(content)
        ending = guard.ends_with_reply()
        try:
            reply = await _store_reply_marked(
                prepared.profile, user_message, mid=mid, raw=made.raw, content=content, favs=made.favs,
                status=status, message_type=kind, trace=prepared.trace, end_turn=ending,
            )
        except Exception:
            # A3: the reply is still delivered, with a visible notice.
            log.exception("archiving reply %s failed", mid)
            reply = made.unsaved(user_message, with_raw=False)
            note = "unsaved"
        await guard.reply_archived(freed=ending and reply.pk is not None)  # S3: the profile may start its next turn now
        await markdown.warm([content])  # issue 24 point 4: rendered off the loop
        await send(render_message(reply, profile=profile, lang=lang, oob=f"outerHTML:#reply-{umid}", notice=note, reply_to=umid, error=error))
        if not error and not stopped:
            # Offline too: a "remember…" request then records a run skipped for want of a model (K10, K11).
            await _after_reply(prepared.profile, prepared.slice, user_message.content, content)
        return reply


# --- A3: a line that could not be saved ------------------------------------------------------


@db_call
def _unsaved_user_message(profile: Profile, frame: UserFrame) -> Message | None:
    """The line as an unsaved Message in the open slice (for the prompt), or None when even
    reading fails. A slice whose injected card was never frozen is not used (that is a write)."""
    now = timezone.now()
    open_slice = Slice.objects.for_profile(profile).open().order_by("-started_at").first()
    if open_slice is None or open_slice.injected_card is None:
        open_slice = Slice(profile=profile, started_at=now, last_message_at=now, tz=frame.tz or "")
        try:
            refresh_injected_card(open_slice, now=now, reason="")  # an unsaved slice: nothing is written
        except Exception:  # noqa: BLE001 - the reply goes on without the card
            log.warning("no card for the unsaved line %s", frame.mid, exc_info=True)
            open_slice.injected_card = ""
    return Message(
        profile=profile, slice=open_slice, mid=frame.mid, speaker=Message.Speaker.USER, content=frame.text,
        created_at=now, tz=frame.tz or "",
    )


@db_call
def save_unsaved_turn(profile: Profile, frame: UserFrame, user_message: Message, reply: Message | None) -> bool:
    """Archive the line (with the time it was said) and then its reply; True when both are stored."""
    archived = archive_line(
        archive_message, profile=profile, mid=frame.mid, speaker=Message.Speaker.USER, content=frame.text,
        tz=frame.tz, local_time=frame.local_time, created_at=user_message.created_at,
    )
    if reply is not None:
        archive_message(
            profile=profile, mid=reply.mid, speaker=Message.Speaker.ASSISTANT, content=reply.content,
            raw_content=reply.raw_content, status=reply.status, message_type=reply.message_type,
            created_at=max(reply.created_at, archived.message.created_at), tz=frame.tz,
        )
    return True


async def unsaved_turn(profile: Profile, frame: UserFrame, send: Send) -> asyncio.Task | None:
    """A3: say the line is not saved yet, reply all the same, and retry saving it later."""
    lang = profile.language
    try:
        user_message = await _unsaved_user_message(profile, frame)
    except Exception:
        log.exception("the archive cannot be read either; no reply to %s", frame.mid)
        await send(notice(gettext_lazy("Your message could not be saved. Nothing was sent; try again."), lang=lang))
        return None
    await send(notice(gettext_lazy("Your message could not be saved yet. The reply follows; saving is retried."), lang=lang))
    await send(render_message(user_message, lang=lang, notice="pending"))
    try:
        reply = await reply_to(profile, user_message, send, local_time=frame.local_time)
    except Exception:
        log.exception("replying to unsaved %s failed", frame.mid)
        reply = None
    retry = asyncio.create_task(save_later(profile, frame, user_message, reply, send))
    _pending_saves.add(retry)
    retry.add_done_callback(_pending_saves.discard)
    return retry


_pending_saves: set[asyncio.Task] = set()  # kept referenced until done


async def save_later(profile: Profile, frame: UserFrame, user_message: Message, reply: Message | None, send: Send) -> bool:
    """Try to archive the unsaved line and its reply again, after each of SAVE_RETRY_SECONDS."""
    for delay in SAVE_RETRY_SECONDS:
        await asyncio.sleep(delay)
        try:
            await save_unsaved_turn(profile, frame, user_message, reply)
        except MidConflict:
            log.warning("unsaved %s: another copy was stored meanwhile", frame.mid)
            return False
        except Exception:
            log.warning("saving %s again failed; retrying later", frame.mid, exc_info=True)
            continue
        try:
            await send(notice(gettext_lazy("Your message and its reply are saved now."), level="info", lang=profile.language))
        except Exception:  # noqa: BLE001 - the page went away; the lines are saved all the same
            pass
        return True
    log.error("unsaved %s could not be archived after %d attempts", frame.mid, len(SAVE_RETRY_SECONDS))
    try:
        await send(notice(gettext_lazy("Your message still could not be saved; copy it if you need it."), lang=profile.language))
    except Exception:  # noqa: BLE001
        pass
    return False
