"""Issue 25 point 1 in a real browser: a line typed and sent while a reply streams is not
refused. Send says it will wait, the line shows at once marked as waiting, and it is answered
when the reply ends, in order. Chinese and English, screenshots of the waiting Send at 1280
and 390 px under var/test-artifacts/ (chat17-25-send-waits-<lang>-<width>.png)."""

import pytest

from memory.models import Message
from tests.e2e.test_chat17_browser import LANGS, Chat17Server
from tests.llm_server import Turn

WORDS = {
    "en": {"later": "Send after this reply", "note": "Waiting: sent when the reply ends", "send": "Send"},
    "zh": {"later": "回复完再发", "note": "等待中：这条回复结束后发出", "send": "发送"},
}


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class SendWhileAReplyStreams(Chat17Server):
    def test_a_line_typed_during_a_reply_waits_and_is_answered_after_it(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            profile = self.account(f"wait{lang}", lang)
            # The second reply (and the turn analyzer's look) take the server's default, "Okay 🙂".
            self.llm.script(Turn(chunks=[f"part {i}. " for i in range(30)], chunk_delay=0.15))
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"wait{lang}", lang)
                composer = page.locator("#composer")
                expect(composer.locator(".send-now")).to_have_text(WORDS[lang]["send"])
                self.say(page, "tell me slowly 慢慢说")
                expect(page.locator(".msg.streaming")).to_have_count(1, timeout=30_000)
                expect(composer).to_have_class("composer waiting")
                expect(composer.locator(".send-later")).to_have_text(WORDS[lang]["later"])
                page.wait_for_function("() => document.querySelector('.msg.streaming .content').textContent.includes('part 2')")
                self.say(page, "and then? 然后呢")  # typed while the reply streams
                queued = page.locator(".msg.user.queued")
                expect(queued).to_have_count(1)
                expect(queued.locator(".queued-note")).to_have_text(WORDS[lang]["note"])
                expect(page.locator("#composer-text")).to_have_value("")
                self.shot(page, "25-send-waits", lang)
                expect(page.locator("#messages > article.msg.assistant:not(.streaming)")).to_have_count(2, timeout=30_000)
                expect(page.locator(".msg.user.queued")).to_have_count(0)
                expect(page.locator("#notices .notice")).to_have_count(0)  # no "still answering"
                expect(composer).to_have_class("composer")
                order = page.locator("#messages > article.msg .content").all_inner_texts()
                assert order[-2].strip() == "and then? 然后呢" and order[-3].startswith("part 0.")
                assert page.csp_errors == []
                browser.close()
            stored = list(Message.objects.filter(profile=profile).order_by("created_at", "id").values_list("speaker", "content"))
            assert [s for s, _ in stored] == ["user", "assistant", "user", "assistant"]
            assert stored[2][1] == "and then? 然后呢" and stored[3][1] == "Okay 🙂"
