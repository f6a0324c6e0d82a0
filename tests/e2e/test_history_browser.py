"""Bring your history in a real browser (SPEC H1, issue 27 point 6): upload a ChatGPT export
on the data page, check the preview, apply it, watch it finish, and find the conversations in
the chat's side panel and on the timeline; then a character card through the same upload
(H2, issue 27 point 5): its preview, its companion made, the link to its settings; zh and en,
1280 and 390 px. Screenshots: var/test-artifacts/history-<state>-<width>-<lang>.png."""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memory.models import Message, Profile, Slice
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import SHOTS, LiveServerWithMedia, shot
from tests.memory.history import samples as s
from tests.memory.interop.card_fixtures import v2_png

LOCALES = {"en": "en-GB", "zh": "zh-CN"}
WORDS = {
    "en": {"preview": "Preview (nothing written yet)", "apply": "Apply this import", "done": "Imported",
           "new": "It makes a new companion", "catch_up": "Catch up on the history",
           "card": "Seraphina.png holds the card “Seraphina” (chara_card_v2).", "lore": "3 entries, 2 enabled",
           "made": "Companion “Seraphina” made from the card."},
    "zh": {"preview": "预览（尚未写入）", "apply": "执行导入", "done": "已导入", "new": "将新建伙伴", "catch_up": "补读历史对话",
           "card": "Seraphina.png 中是角色卡“Seraphina”（chara_card_v2）。", "lore": "3 条，其中 2 条启用",
           "made": "已由角色卡创建伙伴“Seraphina”。"},
}


def off_the_loop(fn):
    """Playwright's sync API runs an event loop in this thread; the ORM refuses to run there."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def imported(username: str, key: str) -> tuple[list[str], int]:
    profile = Profile.objects.get(user__username=username, key=key)
    keys = list(Slice.objects.filter(profile=profile).order_by("started_at").values_list("key", flat=True))
    return keys, Message.objects.filter(profile=profile).count()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class HistoryInTheBrowser(LiveServerWithMedia):
    def test_upload_preview_apply_then_panel_and_timeline(self):
        from playwright.sync_api import expect, sync_playwright

        t0 = time.time() - 2 * 86400
        export = s.chatgpt_zip(Path(self.media.name) / "chatgpt-export.zip", [
            s.chatgpt_conversation(cid="trip", title="Trip to Hangzhou", t0=t0),
            s.chatgpt_conversation(cid="later", title="Another day", t0=t0 + 86400),
        ], images={"file-AbC123-photo.png": s.png()})
        card = Path(self.media.name) / "Seraphina.png"
        card.write_bytes(v2_png())
        for lang in LOCALES:
            self.make_user(f"hist-{lang}", f"pw-hist-{lang}-12345")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            # Every look under `make shots`; else the two that hold both languages and both widths.
            runs = [(lang, width) for lang in LOCALES for width in (1280, 390)]
            for lang, width in (runs if SHOTS else [("en", 1280), ("zh", 390)]):
                words, locale = WORDS[lang], LOCALES[lang]
                ctx = browser.new_context(viewport={"width": width, "height": 900}, locale=locale)
                page = ctx.new_page()
                page.goto(f"{self.live_server_url}/login/")
                page.fill("#id_username", f"hist-{lang}")
                page.fill("#id_password", f"pw-hist-{lang}-12345")
                page.click("main button[type=submit]")
                page.wait_for_selector("#composer-text")
                key = f"mia{width}"
                page.goto(f"{self.live_server_url}/data/")
                page.click("#bring-history a")
                page.fill("#history-upload input[name=profile]", key)
                page.set_input_files("#history-upload input[type=file]", str(export))
                shot(page, f"history-upload-{width}-{lang}", full_page=True)
                page.click("#history-upload button[type=submit]")
                preview = page.locator("#history-preview")
                expect(preview.locator("h2")).to_have_text(words["preview"])
                expect(preview).to_contain_text(words["new"])
                expect(preview.locator("#history-conversations tbody tr")).to_have_count(2)
                expect(preview.locator("#history-conversations")).to_contain_text("Trip to Hangzhou")
                totals = preview.locator("#history-totals")
                expect(totals.locator("tr").nth(0).locator("td")).to_have_text("10")
                expect(totals.locator("tr").nth(1).locator("td")).to_have_text("2")
                expect(totals.locator("tr").nth(3).locator("td")).to_have_text("2 / 0")
                shot(page, f"history-preview-{width}-{lang}", full_page=True)
                page.click("#history-apply")
                expect(page.locator("#history-done")).to_be_visible(timeout=20_000)
                expect(page.locator("#history-progress > h2")).to_have_text(words["done"])
                expect(page.locator("#history-progress #catch-up")).to_contain_text(words["catch_up"])
                shot(page, f"history-done-{width}-{lang}", full_page=True)

                slices, count = off_the_loop(lambda lang=lang, key=key: imported(f"hist-{lang}", key))
                assert len(slices) == 4 and count == 12, (slices, count)
                # The chat's side panel lists the imported conversations.
                page.goto(f"{self.live_server_url}/?profile={key}")
                page.wait_for_selector("#composer-text")
                if width < 700:
                    page.click("#conversations > summary")
                for sl in slices:
                    expect(page.locator(f'#conversation-list li[data-key="{sl}"]')).to_have_count(1)
                expect(page.locator("#conversation-list")).to_contain_text("周末想去杭州")
                shot(page, f"history-panel-{width}-{lang}")
                # And the timeline.
                page.goto(f"{self.live_server_url}/timeline/?profile={key}")
                for sl in slices:
                    expect(page.locator(f"#slice-{sl}")).to_have_count(1)
                shot(page, f"history-timeline-{width}-{lang}", full_page=True)
                # A character card through the same upload (H2).
                page.goto(f"{self.live_server_url}/data/history/")
                page.fill("#history-upload input[name=profile]", f"sera{width}")
                page.set_input_files("#history-upload input[type=file]", str(card))
                page.click("#history-upload button[type=submit]")
                found = page.locator("#history-card")
                expect(found.locator("h2")).to_have_text(words["preview"])
                expect(found).to_contain_text(words["card"])
                expect(found).to_contain_text(words["new"])
                expect(found.locator(".card-preview")).to_contain_text(words["lore"])
                shot(page, f"history-card-preview-{width}-{lang}", full_page=True)
                page.click("#history-apply")
                expect(page.locator("#history-done")).to_have_text(words["made"])
                settings_link = page.locator("#history-card-settings")
                expect(settings_link).to_have_attribute("href", f"/profiles/sera{width}/edit/")
                shot(page, f"history-card-done-{width}-{lang}", full_page=True)
                settings_link.click()
                expect(page.locator("img.avatar.large")).to_be_visible()
                ctx.close()
            browser.close()
