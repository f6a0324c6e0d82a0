"""The archive's "Similar meaning" list (issue 18, SPEC R8) in a real browser: an English
search finds its exact match and, beside it, a Chinese line that means the same. Screenshots
at 1280 and 390 px, English and Chinese, light and dark, in var/test-artifacts/."""

from datetime import UTC, datetime, timedelta

import pytest

from memory.archive import archive_message
from memory.models import Profile
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import SHOTS, LiveChatServer, shot

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class ArchiveSimilarMeaningInTheBrowser(LiveChatServer):
    def test_similar_meaning_beside_exact_matches(self):
        from playwright.sync_api import expect, sync_playwright

        user = self.make_user("lin", "pw-lin-12345")
        profile = Profile.objects.create(user=user, key="mochi", name="Mochi")
        lines = ["The cat knocked a glass off the table", "我的猫今天生病了，我带它去看了兽医。",
                 "Remember to buy batteries for the remote.", "明天早上八点有个会议。"]
        for n, text in enumerate(lines, start=1):
            archive_message(profile=profile, mid=f"c_{n:016x}", speaker="user", content=text,
                            created_at=T0 + timedelta(minutes=n), tz="UTC")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            every = [("en-GB", 1280, "light"), ("en-GB", 390, "dark"), ("zh-CN", 1280, "dark"), ("zh-CN", 390, "light")]
            # Every look under `make shots`; else the two that hold both languages and both widths.
            for lang, width, scheme in (every if SHOTS else (every[0], every[-1])):
                page = browser.new_page(viewport={"width": width, "height": 900}, locale=lang, color_scheme=scheme)
                page.goto(f"{self.live_server_url}/login/")
                page.fill("#id_username", "lin")
                page.fill("#id_password", "pw-lin-12345")
                page.click("button[type=submit]")
                page.wait_for_load_state()
                page.goto(f"{self.live_server_url}/archive/?profile=mochi&q=cat+vet")
                expect(page.locator("#hit-c_0000000000000001")).to_be_visible()
                expect(page.locator("#similar-c_0000000000000002")).to_contain_text("我的猫今天生病了")
                expect(page.locator("ol.similar")).not_to_contain_text("batteries")
                shot(page, f"archive-similar-{lang}-{width}-{scheme}", full_page=True)
                page.close()
            browser.close()
