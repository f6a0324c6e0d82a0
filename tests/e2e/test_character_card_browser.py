"""A character card in a real browser (issue 27 points 5, 7, 8): upload a V2 PNG on the
Companions page, check the preview, apply; the settings page shows the avatar, the lorebook, the
catch-up estimate and the export links; the chat shows the avatar and the greeting's "1 / 3".
Screenshots at 1280 and 390 px, in English and Chinese, land in var/test-artifacts/."""

import json
from datetime import UTC, datetime

import pytest

from memory.interop.character_card import import_character_card
from memory.models import Profile, Slice
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import ARTIFACTS, SHOTS, LiveChatServer, log_in, shot
from tests.llm_server import Turn
from tests.memory.interop.card_fixtures import CHINESE_CARD, v2_png
from tests.previously.agent.helpers import make_slice


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class CharacterCardInTheBrowser(LiveChatServer):
    default_turn = Turn(chunks=["Hello ", "again."])

    def test_import_a_card_and_see_it_on_the_settings_page_and_in_the_chat(self):
        from playwright.sync_api import expect, sync_playwright

        mei = self.make_user("mei", "pw-mei-12345")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        card = ARTIFACTS / "Seraphina.png"
        card.write_bytes(v2_png())
        # A second companion, made from the Chinese card beforehand, with imported history to catch up on.
        import_character_card(json.dumps(CHINESE_CARD, ensure_ascii=False).encode(), user=mei, name="linwan.json")
        linwan = Profile.objects.get(user=mei, name="林晚")
        for day in range(3):
            make_slice(linwan, f"2026-10-{day + 1:02d}-2000", at=datetime(2026, 10, day + 1, 12, 0, tzinfo=UTC),
                       lines=[("user", f"今天在书店待了{day + 1}个小时"), ("assistant", "真好，看了什么书？")])
        history_slice = Slice.objects.for_profile(linwan).order_by("started_at").first().key
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="en-GB")
            log_in(page, self.live_server_url, "mei", "pw-mei-12345")

            page.goto(f"{self.live_server_url}/profiles/")
            page.set_input_files("#card-file", str(card))
            page.click("text=Preview the card")
            expect(page.locator("h1")).to_have_text("Import a character card")
            expect(page.locator(".card-preview")).to_contain_text("3 entries, 2 enabled")
            shot(page, "card-preview-1280-en", full_page=True)
            page.click("text=Import the card")

            expect(page.locator("h1")).to_contain_text("Settings of Seraphina")
            expect(page.locator("img.avatar.large")).to_be_visible()
            expect(page.locator("table.lore tbody tr")).to_have_count(3)
            expect(page.locator(".export-links a")).to_have_count(4)
            expect(page.locator(".catch-up")).to_contain_text("The card has read every past conversation.")
            # Visible is not loaded: read the width once the browser has finished with the image (a broken one
            # is complete too, with width 0, so this still fails on a bad avatar).
            page.wait_for_function("() => document.querySelector('img.avatar.large').complete")
            natural = page.eval_on_selector("img.avatar.large", "img => img.naturalWidth")
            assert natural == 256
            every = ((1280, "en", "en-GB"), (390, "en", "en-GB"), (1280, "zh", "zh-CN"), (390, "zh", "zh-CN"))
            # Every look under `make shots`; else the two that hold both languages and both widths.
            for width, lang, locale in (every if SHOTS else (every[0], every[-1])):
                context = browser.new_context(viewport={"width": width, "height": 900}, locale=locale)
                view = context.new_page()
                log_in(view, self.live_server_url, "mei", "pw-mei-12345")
                view.goto(f"{self.live_server_url}/profiles/seraphina/edit/")
                view.wait_for_function("() => document.querySelector('img.avatar.large').complete")
                shot(view, f"card-settings-{width}-{lang}", full_page=True)
                view.goto(f"{self.live_server_url}/profiles/")
                shot(view, f"card-profiles-{width}-{lang}", full_page=True)
                view.goto(f"{self.live_server_url}/?profile=seraphina")
                view.wait_for_selector("#composer-text")
                shot(view, f"card-chat-{width}-{lang}", full_page=False)
                view.goto(f"{self.live_server_url}/profiles/{linwan.key}/edit/")
                expect(view.locator(".catch-up form button")).to_be_visible()
                shot(view.locator(".catch-up"), f"card-catch-up-{width}-{lang}")
                view.goto(f"{self.live_server_url}/slices/{history_slice}/?profile={linwan.key}")
                expect(view.locator("p.export-links a")).to_have_count(2)
                shot(view, f"card-slice-{width}-{lang}", full_page=False)
                context.close()

            # The chat: the avatar beside the name, the greeting with its alternatives.
            page.goto(f"{self.live_server_url}/?profile=seraphina")
            expect(page.locator(".chat-bar .who img.avatar")).to_be_visible()
            expect(page.locator(".msg.assistant").first).to_contain_text("You're awake, mei.")
            expect(page.locator(".msg.assistant").first).to_contain_text("1 / 3")
            browser.close()
