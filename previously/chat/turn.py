"""The turn (DESIGN "The turn"): archive → recall → prompt → stream → archive → markers.

The consumer only parses frames and hands them here with a `send(html)` coroutine;
every frame sent is a rendered partial of templates/chat/chat.html swapped out-of-band by htmx.
Database work runs in the small sync helpers below, through `db_call` (previously/chat/db.py).
"""

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from asgiref.sync import async_to_sync
from django.tasks import task
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext, gettext_lazy, pgettext

from memory.archive import MidConflict, MidTombstoned, archive_message
from memory.card.store import injected_card_for, refresh_injected_card
from memory.clock import LocalClock, local_clock
from memory.curation import HighlightRefused, add_highlight, contradictions
from memory.models import Highlight, Message, Profile, Slice
from memory.models.archive import USER_MID_RE
from memory.recall import recall
from memory.recall.context import Recalled
from previously.agent.briefing import arrival_briefing
from previously.agent.lifecycle import after_reply, archive_line
from previously.chat import markers, prompt
from previously.chat.db import db_call
from previously.i18n import for_profile
from previously.llm import ProviderError, get_provider
from previously.llm.select import provider_for
from previously.push import apush

log = logging.getLogger(__name__)

Send = Callable[[str], Awaitable[None]]
RECENT_TURNS = 12  # messages of the current slice replayed as chat turns (bounded, O2)
SAVE_RETRY_SECONDS = [2.0, 15.0, 60.0]  # A3: when an unsaved line (and its reply) is tried again
MAX_TEXT = 8000  # characters in one user message


class BadFrame(ValueError):
    """The browser sent something we cannot take; the message says what."""


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
        if len(text) > MAX_TEXT:
            raise BadFrame(format_lazy(
                gettext_lazy("message too long ({count} characters, limit {limit})"), count=len(text), limit=MAX_TEXT
            ))
        return cls(mid=mid, text=text, local_time=data.get("local_time") or None, tz=data.get("tz") or None)


@dataclass
class Prepared:
    profile: Profile
    slice: Slice
    clock: LocalClock
    recalled: Recalled
    messages: list[dict]  # the provider request


def assistant_mid() -> str:
    """SPEC A2: a_<epoch ms>_<short id>."""
    return f"a_{int(timezone.now().timestamp() * 1000)}_{secrets.token_hex(4)}"


# --- rendering ---------------------------------------------------------------------------

def render(partial: str, **context) -> str:
    return render_to_string(f"chat/chat.html#{partial}", context)


def render_message(
    message: Message, *, lang: str, oob: str = "true", notice: str = "", reply_to: str = "", error: str = ""
) -> str:
    can_retry = message.status == Message.Status.FAILED and bool(reply_to)
    return render(
        "message", message=message, lang=lang, oob=oob, notice=notice, reply_to=reply_to,
        can_retry=can_retry, error=error,
    )


def notice(text: str, *, level: str = "error", lang: str | None = None) -> str:
    """A notice line; a lazy `text` is translated in `lang`, the profile's language."""
    return render("notice", text=text, level=level, lang=lang)


# --- database helpers (sync) -----------------------------------------------------------------

@db_call
def _archive_user(profile: Profile, frame: UserFrame):
    # A slice this line closes is snapshotted now; its evolution run is queued (K8, K10).
    return archive_line(
        archive_message, profile=profile, mid=frame.mid, speaker=Message.Speaker.USER,
        content=frame.text, tz=frame.tz, local_time=frame.local_time,
    )


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
    images: bool = False,
) -> Prepared:
    """Recall and the provider request for a reply to `user_message` (constant queries, O2)."""
    profile = _reread(profile)  # persona/language may have changed
    # The archive write hands back its message with the slice attached: no query then.
    slice_ = user_message.slice
    clock = local_clock(now or timezone.now(), user_message.tz or None, local_time)
    recent = _recent_turns(user_message)
    recalled = recall(
        profile=profile,
        query=user_message.content or prompt.turn_text(user_message),
        now=clock.local,
        exclude_ids=[user_message.pk, *(m.pk for m in recent)],
    )
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
        conflicts=contradictions([*recalled.active, *recalled.candidates]),
    )
    return Prepared(profile=profile, slice=slice_, clock=clock, recalled=recalled, messages=messages)


def store_reply(
    profile: Profile, user_message: Message, *, mid: str, raw: str, content: str, favs: list[str],
    status: str, message_type: str = Message.Type.TEXT,
) -> tuple[Message, list[Highlight]]:
    """Archive the cleaned reply and act on its [[fav:]] markers (A5, C2)."""
    reply = archive_message(
        profile=profile, mid=mid, speaker=Message.Speaker.ASSISTANT, content=content,
        raw_content=raw if raw != content else "", status=status, message_type=message_type,
        tz=user_message.tz or None,
    ).message
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


def offline_reply(profile: Profile, user_message: Message, now: datetime) -> str:
    """L2: an answer quoting remembered lines with their dates, clearly not from a model.

    Unlike a model's prompt, which replays the slice's recent turns, this answer may quote the
    current conversation too: only the question itself is left out."""
    recalled = recall(profile=profile, query=user_message.content, now=now, exclude_ids=[user_message.pk])
    lines = recalled.fragments[:3]
    with for_profile(profile):
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

async def handle_send(profile: Profile, data: dict, send: Send) -> None:
    """A user message from the page: archive it (idempotent by mid), then reply."""
    lang = profile.language
    try:
        frame = UserFrame.parse(data)
    except BadFrame as exc:
        await send(notice(exc.args[0], lang=lang))
        return
    try:
        archived = await _archive_user(profile, frame)
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
    await send(render_message(user_message, lang=lang))
    if not archived.created:
        existing = await _reply_after(user_message)
        if existing is not None:  # a resend after a reconnect: show what is stored, write nothing
            await send(render_message(existing, lang=lang, reply_to=user_message.mid))
            return
    await reply_to(profile, user_message, send, local_time=frame.local_time)


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
    for message in lines:
        await send(render_message(message, lang=profile.language))


async def handle_reply(profile: Profile, data: dict, send: Send) -> None:
    """A reply to a line already archived over HTTP (an image upload, A7): once per line."""
    user_message = await _user_message(profile, str(data.get("mid") or ""))
    if user_message is None:
        await send(notice(gettext_lazy("That message is no longer in the archive."), lang=profile.language))
        return
    lang = profile.language
    await send(render_message(user_message, lang=lang))
    existing = await _reply_after(user_message)
    if existing is not None:  # a resend: show what is stored, write nothing
        await send(render_message(existing, lang=lang, reply_to=user_message.mid))
        return
    await reply_to(profile, user_message, send, local_time=data.get("local_time") or None)


@task()
def reply_in_background(profile_id: int, mid: str) -> None:
    """The reply to a line archived over plain HTTP (an image sent without JavaScript, A7): the
    normal turn, its frames pushed to the profile's open pages; archived for the next load."""
    profile = Profile.objects.filter(pk=profile_id).first()
    if profile is None:
        return

    async def send(html: str) -> None:
        await apush(profile, html)

    async_to_sync(handle_reply)(profile, {"mid": mid}, send)


async def handle_retry(profile: Profile, data: dict, send: Send) -> None:
    """A new reply attempt for a user message whose reply failed (L3)."""
    user_message = await _user_message(profile, str(data.get("mid") or ""))
    if user_message is None:
        await send(notice(gettext_lazy("That message is no longer in the archive."), lang=profile.language))
        return
    if data.get("failed"):
        await send(render("gone", target=f"retry-{data['failed']}"))
    await reply_to(profile, user_message, send)


async def reply_to(
    profile: Profile, user_message: Message, send: Send, *, local_time: str | None = None
) -> Message:
    """Recall, prompt, stream the reply into the page, archive it, act on its markers."""
    lang = profile.language
    umid = user_message.mid
    provider = get_provider()
    prepared = await db_call(prepare)(
        profile, user_message, local_time=local_time, images=getattr(provider, "supports_images", False)
    )
    lang = prepared.profile.language
    provider = provider_for(prepared.profile)  # the companion's own model and temperature (issue 17)
    await send(render("reply_start", umid=umid, lang=lang, offline=provider.offline))
    cleaner = markers.StreamCleaner()
    error = ""
    if provider.offline:
        text = await db_call(offline_reply)(prepared.profile, user_message, prepared.clock.local)
        cleaner.feed(text)
        await send(render("token", umid=umid, text=text))
    else:
        try:
            async for chunk in provider.astream(prepared.messages):
                visible = cleaner.feed(chunk)
                if visible:
                    await send(render("token", umid=umid, text=visible))
        except ProviderError as exc:
            error = str(exc)
        except Exception as exc:  # anything else from the model path is a model failure too
            log.exception("model failure replying to %s", umid)
            error = f"the model failed: {exc.__class__.__name__}"
        rest = cleaner.finish()
        if rest and not error:
            await send(render("token", umid=umid, text=rest))
    content, favs = markers.clean(cleaner.raw)
    if error:
        favs = []  # a failed reply's markers are not acted on
    status = Message.Status.FAILED if error else Message.Status.COMPLETE
    kind = Message.Type.SYSTEM if provider.offline else Message.Type.TEXT
    mid = assistant_mid()
    note = ""
    if user_message.pk is None:  # A3: its line is not saved yet; both are saved together later
        reply = Message(
            profile=prepared.profile, slice=prepared.slice, mid=mid, speaker=Message.Speaker.ASSISTANT,
            content=content, raw_content=cleaner.raw if cleaner.raw != content else "", status=status,
            message_type=kind, created_at=timezone.now(), tz=user_message.tz,
        )
        await send(render_message(reply, lang=lang, oob=f"outerHTML:#reply-{umid}", notice="pending", reply_to=umid, error=error))
        return reply
    try:
        reply, _ = await db_call(store_reply)(
            prepared.profile, user_message, mid=mid, raw=cleaner.raw, content=content, favs=favs,
            status=status, message_type=kind,
        )
    except Exception:
        # A3: the reply is still delivered, with a visible notice.
        log.exception("archiving reply %s failed", mid)
        reply = Message(
            profile=prepared.profile, slice=prepared.slice, mid=mid, speaker=Message.Speaker.ASSISTANT,
            content=content, status=status, message_type=kind, created_at=timezone.now(), tz=user_message.tz,
        )
        note = "unsaved"
    if error:
        log.warning("reply to %s failed: %s", umid, error)
    await send(render_message(reply, lang=lang, oob=f"outerHTML:#reply-{umid}", notice=note, reply_to=umid, error=error))
    if not error:
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
