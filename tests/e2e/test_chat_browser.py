"""The chat journey in a real browser (SPEC A1, A2, L1): log in, send, watch the reply
stream in from a local OpenAI-compatible server, reload, see both lines once.

Served by Channels' ChannelsLiveServerTestCase (Daphne in a child process; pytest-django's
live_server does not speak websockets). The child is forked in setUpClass, so the provider
installed with reset_provider just before is the one the server uses. All ORM work happens
outside the Playwright block: Playwright's sync API runs an event loop in this thread, and
Django refuses ORM calls while a loop runs (so DJANGO_ALLOW_ASYNC_UNSAFE is not needed).
"""

import re

import pytest

from memory.models import Message
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in
from tests.llm_server import Turn


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class ChatInTheBrowser(LiveChatServer):
    def test_send_a_message_watch_the_reply_stream_in_and_reload(self):
        from playwright.sync_api import expect, sync_playwright

        self.make_user("ana", "pw-ana-12345")
        chunks = ["你好", "，Ana", "！", " Nice ", "to ", "see ", "you 🙂"]
        self.llm.script(Turn(chunks=chunks, delay=0.0))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 390, "height": 800})
            log_in(page, self.live_server_url, "ana", "pw-ana-12345")
            page.wait_for_function("() => window.htmx && document.querySelector('[ws-connect]')")
            page.wait_for_timeout(300)  # let the socket open
            # Record every text the reply shows while it streams.
            page.evaluate(
                """() => { window.seen = []; new MutationObserver(() => {
                     const el = document.querySelector('.msg.streaming .content');
                     if (el) window.seen.push(el.textContent);
                   }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true}); }"""
            )
            page.fill("#composer-text", "我今天去看海了 🌊 <b>not bold</b>")
            page.press("#composer-text", "Enter")
            reply = page.locator(".msg.assistant:not(.streaming) .content")
            expect(reply).to_have_text("你好，Ana！ Nice to see you 🙂", timeout=10_000)
            seen = page.evaluate("window.seen")
            assert any(0 < len(s) < len("你好，Ana！ Nice to see you 🙂") for s in seen), seen  # it streamed
            assert page.locator("#composer-text").input_value() == ""
            assert page.locator(".msg.user b").count() == 0  # user text is escaped

            page.reload()
            page.wait_for_selector("#composer-text")
            user_lines = page.locator(".msg.user .content")
            expect(user_lines).to_have_count(1)
            expect(user_lines).to_have_text("我今天去看海了 🌊 <b>not bold</b>")
            expect(page.locator(".msg.assistant .content")).to_have_count(1)
            expect(page.locator(".msg.assistant .content")).to_have_text("你好，Ana！ Nice to see you 🙂")
            browser.close()

        rows = list(Message.objects.order_by("created_at").values_list("mid", "speaker"))
        assert [s for _, s in rows] == ["user", "assistant"]
        assert re.fullmatch(r"c_[0-9a-f]{16}", rows[0][0])  # made by the browser (A2)
        system_prompt = self.llm.requests[0]["messages"][0]["content"]
        assert "用户当地时间" in system_prompt or "local time" in system_prompt
