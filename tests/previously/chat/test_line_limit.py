"""Issue 24 point 5 (SPEC S6): a chat line over PREVIOUSLY_MAX_MESSAGE_CHARS is refused over the
socket with the limit, its setting and what to do; nothing is archived and the text goes back
into the composer. The default frame limit carries a line at the message limit, so a long line
meets the message's refusal, not the frame's."""

import pytest
from channels.db import database_sync_to_async
from django.conf import settings as django_settings
from django.utils import timezone

from memory.models import Message, Profile, Slice
from previously.chat import prompt
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def stored():
    return list(Message.objects.values_list("mid", flat=True))


async def test_a_line_over_the_message_limit_is_refused_and_given_back(connect, user, profile, llm_server, llm_provider,
                                                                       settings):
    settings.PREVIOUSLY_MAX_MESSAGE_CHARS = 2048
    chat = await connect(user)
    await chat.send("长" * 2049, mid=new_mid(1))
    frame = await chat.ws.receive_from(timeout=5)
    assert "2049" in frame and "2048" in frame and "PREVIOUSLY_MAX_MESSAGE_CHARS" in frame and "shorten" in frame
    assert f'id="msg-{new_mid(1)}" hx-swap-oob="delete"' in frame  # the pending line goes
    assert 'data-text="' + "长" * 2049 + '"' in frame  # and its text back into the composer
    assert await stored() == [] and llm_server.requests == []
    frames = await chat.say("长" * 2048, mid=new_mid(2))  # at the limit: taken
    assert await stored() == [new_mid(2), *(m for m in await stored() if m.startswith("a_"))]
    assert frames


def test_the_default_frame_limit_carries_a_line_at_the_message_limit():
    # 4 bytes a character at most in UTF-8, plus the frame's other fields.
    assert django_settings.PREVIOUSLY_WS_MAX_FRAME_BYTES >= 4 * django_settings.PREVIOUSLY_MAX_MESSAGE_CHARS + 4096


def test_the_prompt_prefix_cache_is_bounded_in_bytes():
    """Issue 24 point 5: 1,000 slices' prefixes with a persona at its limit and a long card are
    ~50 MB of text; the cache keeps at most PREFIX_CACHE_BYTES of them."""
    prompt._prefix_cache.clear()
    profile = Profile(persona="p" * 16 * 1024, language="en")
    started = timezone.now()
    for n in range(1000):
        prompt.stable_prefix(profile=profile, slice_=Slice(pk=n + 1, started_at=started), card_text="c" * 8000)
    assert 0 < prompt._prefix_cache.bytes <= prompt.PREFIX_CACHE_BYTES
    assert len(prompt._prefix_cache) < 1000
    prompt._prefix_cache.clear()
