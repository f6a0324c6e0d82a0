"""Issue 24 in a real browser, in Chinese and English, with screenshots at 1280 and 390 px under
var/test-artifacts/ (limits-<what>-<lang>-<width>.png): a chat line over the message limit is
refused with its limit, setting and advice, and its text comes back; a reply over the Markdown
bound is plain text with a note; a link to another host shows the host and goes through the
click-through page; a persona over its limit is refused on the settings page; a GIF bomb keeps
its first frame and says so. The page's CSP reports nothing."""

import tempfile
from pathlib import Path

import pytest
from django.test.utils import override_settings

from memory.archive import archive_message
from tests.e2e.test_chat17_browser import LANGS, Chat17Server
from tests.gif_bomb import bomb_gif

WORDS = {"en": {"plain": "Shown as plain text", "leave": "This link leads out of Previously"},
         "zh": {"plain": "按纯文本显示", "leave": "这个链接通往 Previously 之外"}}


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class LimitsInTheBrowser(Chat17Server):
    @classmethod
    def setUpClass(cls):
        cls.media = tempfile.TemporaryDirectory()
        cls._limits = override_settings(  # before the fork, so the server has them
            MEDIA_ROOT=cls.media.name, PREVIOUSLY_MAX_MESSAGE_CHARS=1024, PREVIOUSLY_MAX_PERSONA_CHARS=256,
            PREVIOUSLY_MARKDOWN_MAX_CHARS=1000, PREVIOUSLY_IMAGE_MAX_PIXELS=16_000_000,
        )
        cls._limits.enable()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls._limits.disable()
        cls.media.cleanup()

    def shots(self, page, what: str, lang: str):
        self.shot(page, what, lang, prefix="limits")

    def test_refusals_plain_text_and_the_click_through(self):
        from playwright.sync_api import expect, sync_playwright

        bomb = Path(self.media.name) / "bomb.gif"
        bomb.write_bytes(bomb_gif((2500, 2500), 50))
        for lang in LANGS:
            profile = self.account(f"lim{lang}", lang)
            archive_message(profile=profile, mid="c_00000000000000a1", speaker="user", content="links?")
            archive_message(profile=profile, mid="a_1700000000000_0000000a", speaker="assistant",
                            content="Your bank says hi: [log in here](https://evil.example/login?next=%2Fpay) 🙂")
            archive_message(profile=profile, mid="a_1700000000001_0000000b", speaker="assistant",
                            content="**not bold** " + "[" * 1200)
            with sync_playwright() as p:
                browser, context, page = self.open_chat(p, f"lim{lang}", lang)
                expect(page.locator(".md-note")).to_contain_text(WORDS[lang]["plain"])
                expect(page.locator(".link-host")).to_have_text("(evil.example)")
                long_line = "太长了" * 400  # 1,200 characters, over 1,024
                page.fill("#composer-text", long_line)
                page.press("#composer-text", "Enter")
                notice = page.locator("#notices .notice").last
                expect(notice).to_contain_text("PREVIOUSLY_MAX_MESSAGE_CHARS", timeout=10_000)
                expect(notice).to_contain_text("1200")
                expect(page.locator("#composer-text")).to_have_value(long_line)  # given back, not lost
                self.shots(page, "line", lang)
                page.fill("#composer-text", "")
                page.set_input_files("#image-input", str(bomb))
                expect(page.locator("#notices .notice").last).to_contain_text("PREVIOUSLY_IMAGE_MAX_FRAMES",
                                                                             timeout=10_000)
                page.wait_for_timeout(500)
                self.shots(page, "gif", lang)
                href = page.locator(".content.md a").first.get_attribute("href")
                assert href.startswith("/chat/leave/?to=https%3A%2F%2Fevil.example")
                assert page.locator(".content.md a").first.get_attribute("rel") == "noopener noreferrer"
                page.goto(self.live_server_url + href)
                expect(page.locator("h1")).to_have_text(WORDS[lang]["leave"])
                expect(page.locator(".leave-address code")).to_have_text("https://evil.example/login?next=%2Fpay")
                self.shots(page, "leave", lang)
                page.goto(f"{self.live_server_url}/profiles/owner/edit/")
                page.fill("#id_persona", "p" * 300)
                page.click("main form button[type=submit]")
                expect(page.locator("#id_persona_error")).to_contain_text("PREVIOUSLY_MAX_PERSONA_CHARS")
                page.locator("#id_persona_error").scroll_into_view_if_needed()
                self.shots(page, "persona", lang)
                assert page.csp_errors == []
                browser.close()
