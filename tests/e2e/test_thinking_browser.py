"""A model slow to its first word shows "thinking…" (issue 26 point 3): a CPU model reading a
long prompt sends nothing for many seconds; after 3 s the streaming reply says so, and the
words replace it when they come. Screenshots at 390 and 1280 px in English and Chinese."""


import pytest

from memory.models import Profile
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in, shot
from tests.llm_server import Turn


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class ThinkingInTheBrowser(LiveChatServer):
    default_turn = Turn(chunks=["Here ", "I am."], delay=7.0)  # every request slow (the analyzer's too); "thinking…" shows after 3 s

    def test_a_slow_first_word_shows_thinking_then_the_words(self):
        from playwright.sync_api import expect, sync_playwright

        user = self.make_user("ana", "pw-ana-12345")
        shots = [("en", 390), ("zh", 1280)]
        for lang, width in shots:
            Profile.objects.filter(user=user).update(language=lang)  # ORM outside Playwright's loop
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": width, "height": 700})
                log_in(page, self.live_server_url, "ana", "pw-ana-12345")
                page.wait_for_function("() => window.htmx && document.querySelector('[ws-connect]')")
                page.wait_for_timeout(300)
                page.fill("#composer-text", "Are you there?")
                page.press("#composer-text", "Enter")
                page.wait_for_selector(".msg.streaming", timeout=30_000)
                thinking = page.locator(".msg.streaming .thinking")
                expect(thinking).to_be_visible(timeout=8_000)
                expect(thinking).to_have_text("thinking…" if lang == "en" else "思考中…")
                shot(page, f"chat-thinking-{lang}-{width}")
                expect(page.locator(".msg.assistant:not(.streaming) .content").last).to_have_text("Here I am.", timeout=15_000)
                browser.close()
