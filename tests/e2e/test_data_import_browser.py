"""The full import in a real browser (SPEC X2, issue 24 point 6): upload an export on the data
page, check the preview, apply it, land on its progress page, and see the report; the page while
the apply runs (its bar and stage, polled by htmx); zh and en, 1280 and 390 px, light and dark.
Screenshots: var/test-artifacts/data-import-<state>-<width>-<lang>-<scheme>.png."""

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.utils import translation
from django.utils.translation import gettext

from memory.interop.export import export_full
from memory.interop.full.write import kind_shown
from memory.models import Message, Profile
from previously.pages.data import progress
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import SHOTS, LiveServerWithMedia, log_in, shot
from tests.factories import MessageFactory, ProfileFactory

LOCALES = {"en": "en-GB", "zh": "zh-CN"}
WORDS = {
    "en": {"preview": "Preview (nothing written yet)", "importing": "Importing…", "done": "Imported",
           "stage": "Writing messages: 2 of 3."},
    "zh": {"preview": "预览（尚未写入）", "importing": "正在导入…", "done": "已导入", "stage": "正在写入 消息：2 / 3。"},
}
LINES = ["第一句 🐱 the first line", "second line, mixed 中文 ✨", "третья строка, and a third"]


def off_the_loop(fn):
    """Playwright's sync API runs an event loop in this thread; the ORM refuses to run there."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def an_export(path: Path) -> None:
    """Three lines of a companion of someone else, exported as the data page downloads it."""
    source = ProfileFactory(key="owner", language="en")
    for text in LINES:
        MessageFactory(profile=source, content=text)
    path.write_text(json.dumps(export_full(profiles=Profile.objects.filter(pk=source.pk)).data, ensure_ascii=False))


def lines_of(username: str) -> list[str]:
    return sorted(Message.objects.filter(profile__user__username=username).values_list("content", flat=True))


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class FullImportInTheBrowser(LiveServerWithMedia):
    def test_upload_preview_apply_and_its_progress_page(self):
        from playwright.sync_api import expect, sync_playwright

        export = Path(self.media.name) / "previously-export.json"
        off_the_loop(lambda: an_export(export))
        # Every look when the screenshots are asked for (`make shots`); else the two far corners
        # of the eight, which already hold both languages, widths and schemes.
        runs = [(lang, width, scheme) for lang in LOCALES
                for width, scheme in ((1280, "light"), (390, "light"), (1280, "dark"), (390, "dark"))]
        if not SHOTS:
            runs = [("en", 1280, "light"), ("zh", 390, "dark")]
        for lang, width, scheme in runs:
            self.make_user(f"full-{lang}-{width}-{scheme}", f"pw-full-{lang}-{width}-{scheme}-12345")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            for lang, width, scheme in runs:
                words, locale, username = WORDS[lang], LOCALES[lang], f"full-{lang}-{width}-{scheme}"
                ctx = browser.new_context(viewport={"width": width, "height": 900}, locale=locale,
                                          color_scheme=scheme)
                page = ctx.new_page()
                log_in(page, self.live_server_url, username, f"pw-{username}-12345", submit="main button[type=submit]")
                page.goto(f"{self.live_server_url}/data/")
                page.set_input_files("input[name=export]", str(export))
                page.click("form[enctype] button[type=submit]")
                preview = page.locator("#preview")
                expect(preview.locator("h3")).to_have_text(words["preview"])
                shot(page, f"data-import-preview-{width}-{lang}-{scheme}", full_page=True)
                token = preview.locator("input[name=token]").get_attribute("value")
                preview.locator("button[type=submit]:not([name=cancel])").click()
                # Its own page: the report once it ends. The apply runs in a child process, which
                # starts Django first: seconds on a loaded machine (once over 5 s, with a profiler on).
                expect(page).to_have_url(re.compile(rf"/data/import/progress/{token}/$"))
                done = page.locator("#import-progress")
                expect(done.locator("h3")).to_have_text(words["done"], timeout=30_000)
                expect(done.locator("table.counts")).to_be_visible()
                shot(page, f"data-import-done-{width}-{lang}-{scheme}", full_page=True)
                assert off_the_loop(lambda username=username: lines_of(username)) == sorted(LINES)
                # The same page while an apply runs, as its stage is written, polled each second.
                ended = progress.read(token)
                with translation.override("zh-hans" if lang == "zh" else "en"):  # the stage as the import's child writes it
                    stage = gettext("writing %(kind)s") % {"kind": kind_shown("messages")}
                # The server's task takes how the apply ended from its child, not from this file.
                progress.write(token, {"state": "running", "stage": stage, "done": 2, "total": 3})
                page.reload()
                running = page.locator("#import-progress")
                expect(running.locator("h3")).to_have_text(words["importing"])
                expect(running.locator("#import-stage")).to_have_text(words["stage"])
                expect(running.locator("#import-bar")).to_have_attribute("value", "2")
                expect(page.locator("#import-upload input[name=export]")).to_have_count(0)  # one import at a time
                shot(page, f"data-import-running-{width}-{lang}-{scheme}", full_page=True)
                progress.write(token, ended)  # the next poll ends it
                expect(page.locator("#import-progress h3")).to_have_text(words["done"], timeout=5_000)
                expect(page.locator("#import-upload input[name=export]")).to_be_visible()  # and the form is back
                shot(page, f"data-import-ended-{width}-{lang}-{scheme}", full_page=True)
                ctx.close()
            browser.close()
