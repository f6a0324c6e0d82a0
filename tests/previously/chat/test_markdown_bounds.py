"""Issue 24 point 4 (SPEC S6): Markdown rendering never holds the event loop. A reply over
PREVIOUSLY_MARKDOWN_MAX_CHARS is shown as escaped plain text with a note naming the setting;
the rendered HTML is cached per text (bounded in bytes); the chat socket renders in a thread
before it builds a frame (resync, choose, the final reply). Point 9: a link to another host
goes through a click-through page showing the address."""

import asyncio
import json
import os
from urllib.parse import quote

import pytest
from channels.db import database_sync_to_async
from django.urls import reverse

from memory.archive import archive_message
from previously.chat import markdown
from previously.chat.lru import ByteLRU
from tests.previously.chat.conftest import new_mid


@pytest.fixture(autouse=True)
def fresh_cache():
    markdown._cache.clear()
    yield
    markdown._cache.clear()


def test_a_reply_over_the_bound_is_escaped_plain_text_with_a_note(settings):
    settings.PREVIOUSLY_MARKDOWN_MAX_CHARS = 1000
    shown = markdown.display_html("[" * 99_000 + "<b>x</b>")
    assert "PREVIOUSLY_MARKDOWN_MAX_CHARS" in shown and "99008" in shown and "1000" in shown
    assert '<div class="md-plain">' + "[" * 10 in shown and "&lt;b&gt;x&lt;/b&gt;" in shown and "<b>" not in shown
    assert len(markdown._cache) == 0  # escaping is cheap: nothing cached


def _long_reply() -> str:
    """Over PROCESS_CHARS: varied paragraphs in both languages, a list, and a link out."""
    lines = [f"{i}. **第{i}点** — point {i}: see [the notes](https://example.org/n/{i}) 🙂" for i in range(1, 80)]
    return "\n".join(lines)


def test_a_long_reply_renders_in_the_helper_process_exactly_as_in_the_thread():
    """Issue 24 point 4: a long text's parse would keep the GIL from every other request, so it
    runs in one helper process; the HTML is the same, links out still lead to the click-through."""
    text = _long_reply()
    assert len(text) >= markdown.PROCESS_CHARS
    here = markdown.sanitised_html(text, reverse("chat_leave"))
    assert markdown.render_markdown(text) == here
    helper = markdown._renderer["process"]
    assert helper.pid != os.getpid() and helper.poll() is None  # another process, still there
    assert here.count('<span class="link-host">(example.org)</span>') == 79 and "<strong>第1点</strong>" in here
    assert f'{reverse("chat_leave")}?to=https%3A%2F%2Fexample.org%2Fn%2F1' in here
    assert markdown.render_markdown(text + " ") == markdown.sanitised_html(text + " ", reverse("chat_leave"))
    assert markdown._renderer["process"] is helper  # asked again, not started again


def test_a_dead_helper_process_is_replaced_and_an_error_is_met_here():
    text = _long_reply()
    expected = markdown.sanitised_html(text, reverse("chat_leave"))
    markdown.render_markdown(text)
    helper = markdown._renderer["process"]
    helper.kill()
    helper.wait()
    assert markdown.render_markdown(text) == expected
    assert markdown._renderer["process"] is not helper
    with pytest.raises(UnicodeEncodeError):  # nh3 takes no lone surrogate, in either process
        markdown.render_markdown("\ud800" + text)
    assert markdown._renderer["process"].poll() is None  # the helper said so and lives on


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_process_starts_a_helper_of_its_own():
    """Two processes asking one helper over the same pipes would read each other's answers."""
    text = _long_reply()
    markdown.render_markdown(text)
    pid = os.fork()
    if pid == 0:  # the child: no helper of the parent's
        os._exit(0 if "process" not in markdown._renderer else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert markdown._renderer["process"].poll() is None  # the parent's is untouched


def test_a_text_is_rendered_once_and_the_cache_is_bounded_in_bytes(monkeypatch):
    calls = []
    real = markdown.render_markdown
    monkeypatch.setattr(markdown, "render_markdown", lambda text: calls.append(text) or real(text))
    assert markdown.display_html("**a**") == markdown.display_html("**a**") == "<p><strong>a</strong></p>\n"
    assert calls == ["**a**"]
    cache = ByteLRU(10_000)
    for n in range(50):
        cache.put(n, "x" * 1000)
    assert cache.bytes <= 10_000 and len(cache) < 10 and cache.get(49) is not None and cache.get(0) is None
    cache.put("huge", "y" * 20_000)  # larger than the whole bound: not kept, nothing evicted for it
    assert cache.get("huge") is None and cache.get(49) is not None


@database_sync_to_async
def _archive(profile, mid, speaker, text):
    return archive_message(profile=profile, mid=mid, speaker=speaker, content=text).message


@pytest.mark.django_db(transaction=True)
async def test_resync_renders_markdown_in_a_thread_never_on_the_event_loop(connect, user, profile, monkeypatch):
    on_loop = []
    real = markdown.render_markdown

    def watched(text):
        try:
            asyncio.get_running_loop()
            on_loop.append(text[:20])
        except RuntimeError:
            pass
        return real(text)

    monkeypatch.setattr(markdown, "render_markdown", watched)
    await _archive(profile, new_mid(1), "user", "hi")
    for n in range(3):
        await _archive(profile, f"a_170000000000{n}_abcdef0{n}", "assistant", f"**reply {n}** " + "[" * 500)
    chat = await connect(user)
    await chat.ws.send_to(text_data=json.dumps({"action": "resync", "after": new_mid(1)}))
    got = [await chat.ws.receive_from(timeout=10) for _ in range(3)]
    assert all("<strong>reply" in frame for frame in got)
    assert on_loop == []


def test_a_link_to_another_host_goes_through_the_click_through_showing_the_host():
    html = markdown.render_markdown("[your bank](https://evil.example/login?a=1&b=2) [here](/chat/) [m](mailto:a@b.c)")
    leave = reverse("chat_leave") + "?to=" + quote("https://evil.example/login?a=1&b=2", safe="")
    assert f'href="{leave.replace("&", "&amp;")}"' in html
    assert '<span class="link-host">(evil.example)</span>' in html
    assert 'rel="noopener noreferrer"' in html and 'target="_blank"' in html
    assert 'href="/chat/"' in html and 'href="mailto:a@b.c"' in html  # not another host: no detour


@pytest.mark.django_db
def test_the_click_through_page_shows_the_whole_address_and_refuses_anything_else(client, profile):
    client.force_login(profile.user)
    page = client.get(reverse("chat_leave"), {"to": "https://evil.example/login?a=1&b=2"})
    html = page.content.decode()
    assert page.status_code == 200
    assert "<code>https://evil.example/login?a=1&amp;b=2</code>" in html
    assert 'href="https://evil.example/login?a=1&amp;b=2" rel="noopener noreferrer nofollow"' in html
    assert '<strong class="leave-host">evil.example</strong>' in html
    for bad in ("javascript:alert(1)", "data:text/html,x", "//evil.example/", "/chat/"):
        refused = client.get(reverse("chat_leave"), {"to": bad})
        assert refused.status_code == 400 and "javascript:" not in refused.content.decode().split("<main")[-1]
