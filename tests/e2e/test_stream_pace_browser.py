"""A fast model's reply in the browser (issue 24 point 11, BENCH §4): a chunk per token, 100 a
second; the page gets the first words at once and the rest at most every TOKEN_FRAME_SECONDS.
What the streaming line shows is at every moment the start of the reply, in order, with
nothing lost, and the finished line is the whole reply."""

import pytest

from memory.models import Profile
from previously.chat.turn import TOKEN_FRAME_SECONDS
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in
from tests.llm_server import Turn

WORDS = [f"词{i} " if i % 3 == 0 else f"word{i} " for i in range(80)] + ["🎉"]

# Every time the streaming line's text changes, what it shows.
OBSERVE = """() => {
  window.shown = [];
  new MutationObserver(() => {
    const line = document.querySelector('.msg.streaming .content');
    if (line && line.textContent !== window.shown[window.shown.length - 1]) window.shown.push(line.textContent);
  }).observe(document.querySelector('#messages'), {subtree: true, childList: true, characterData: true});
}"""


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class StreamPaceInTheBrowser(LiveChatServer):
    default_turn = Turn(chunks=WORDS, chunk_delay=0.01)

    def test_a_fast_model_s_words_arrive_in_order_in_a_few_frames(self):
        from playwright.sync_api import expect, sync_playwright

        user = self.make_user("ana", "pw-ana-12345")
        Profile.objects.filter(user=user).update(language="en")
        whole = "".join(WORDS)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 700})
            log_in(page, self.live_server_url, "ana", "pw-ana-12345")
            page.wait_for_function("() => window.htmx && document.querySelector('[ws-connect]')")
            page.wait_for_timeout(300)
            page.evaluate(OBSERVE)
            page.fill("#composer-text", "Tell me a long story")
            page.press("#composer-text", "Enter")
            expect(page.locator(".msg.assistant:not(.streaming) .content").last).to_have_text(whole.strip(),
                                                                                            timeout=30_000)
            shown = [text for text in page.evaluate("window.shown") if text]
            browser.close()
        assert shown and all(whole.startswith(text) for text in shown), shown
        # 81 chunks over ~0.8 s: about one frame per TOKEN_FRAME_SECONDS, not one per chunk.
        assert 2 <= len(shown) <= 0.81 / TOKEN_FRAME_SECONDS + 6, shown
