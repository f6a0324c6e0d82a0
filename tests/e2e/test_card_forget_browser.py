"""Issue 15 in a real browser: the person edits a card line, removes one, restores the card of
an earlier conversation, then deletes a line whose conversation the card cites and chooses to
drop that card line too (K16, D6, D7). Screenshots of the card page and the delete
confirmation at 1280 and 390 px, English and Chinese, land in var/test-artifacts/."""

from datetime import UTC, datetime, timedelta

import pytest

from memory.card import parse, render
from memory.card.format import Card as ParsedCard
from memory.card.format import Fact, IdentityLine, NowItem
from memory.card.store import snapshot_slice
from memory.models import Card, EvolutionRun, Message, Profile, Slice, Tombstone
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import SHOTS, LiveChatServer, log_in, shot
from tests.factories import MessageFactory, SliceFactory

AT = datetime(2026, 8, 17, 5, 15, tzinfo=UTC)
REF = "2026/08/17/0515"
SAID = "I adopted a cat named Tofu last spring, she sleeps on my keyboard 🐱"


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class CardAndForgetInTheBrowser(LiveChatServer):
    def setUp(self):
        user = self.make_user("mei", "pw-mei-12345")
        self.profile = Profile.objects.create(user=user, key="owner", name="Sea", language="en")
        slice_ = SliceFactory(profile=self.profile, key="2026-08-17-0515", started_at=AT, last_message_at=AT, tz="UTC")
        self.said = MessageFactory(profile=self.profile, slice=slice_, speaker="user", mid="c_00000000000000c1",
                                   content=SAID, created_at=AT)
        MessageFactory(profile=self.profile, slice=slice_, speaker="assistant", mid="a_1760000000000_r1",
                       content=f"Offline — you said: {SAID}", created_at=AT + timedelta(minutes=1))
        slice_.close(reason=Slice.CloseReason.GAP, at=AT + timedelta(minutes=2))
        Card.objects.create(profile=self.profile, version=1, text=render(ParsedCard(
            identity=(IdentityLine("Name", "Mei", (REF,)),),
            facts=(Fact("Has a cat called Tofu", (REF,)), Fact("Moved to Lyon in 2026", (REF,))),
            now=(NowItem("Learning pottery on Tuesdays", (REF,), AT.date()),),
        )))
        snapshot_slice(slice_)
        self.slice = slice_

    def test_edit_remove_restore_then_forget_with_the_card_line(self):
        from playwright.sync_api import expect, sync_playwright

        url = self.live_server_url
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="en-GB")
            log_in(page, url, "mei", "pw-mei-12345")

            # Edit a line: it keeps its place and now cites the person.
            page.goto(f"{url}/card/")
            shot(page, "card-1280-en", full_page=True)
            lyon = page.locator("#previously-on .card-section li").filter(has_text="Moved to Lyon in 2026")
            lyon.locator("summary").click()
            lyon.locator("input[name=text]").fill("Moved to Lyon in 2025")
            lyon.locator("button[type=submit]").first.click()
            expect(page.locator(".flash")).to_contain_text("You corrected Past")
            edited = page.locator("#previously-on .card-section li").filter(has_text="Moved to Lyon in 2025")
            expect(edited).to_contain_text("you said so")

            # Remove a line.
            pottery = page.locator("#previously-on .card-section li").filter(has_text="Learning pottery on Tuesdays")
            pottery.get_by_role("button", name="Remove").click()
            expect(page.locator(".flash")).to_contain_text("You removed from Now")
            expect(page.locator("#previously-on .card-section").filter(has_text="Learning pottery")).to_have_count(0)

            # Restore the card as it was at the end of the conversation.
            page.goto(f"{url}/card/?at={self.slice.key}")
            page.click("text=Restore the card to this version")
            expect(page.locator(".flash")).to_contain_text("You restored the card")
            sections = page.locator("#previously-on .card-section")
            expect(sections.filter(has_text="Learning pottery on Tuesdays")).to_have_count(1)
            expect(sections.filter(has_text="Moved to Lyon in 2026")).to_have_count(1)

            # The card page at phone width and in Chinese, the confirmation everywhere.
            cookies = page.context.cookies()
            every = ((1280, "zh-CN", "1280-zh"), (390, "en-GB", "390-en"), (390, "zh-CN", "390-zh"))
            # Every look under `make shots`; else the two that hold both languages and both widths.
            for width, locale, tag in (every if SHOTS else every[:2]):
                other = browser.new_page(viewport={"width": width, "height": 900}, locale=locale)
                other.context.add_cookies(cookies)
                other.goto(f"{url}/card/")
                shot(other, f"card-{tag}", full_page=True)
                self._open_confirmation(other, expect)
                shot(other.locator(f"#actions-{self.said.mid}"), f"delete-confirm-{tag}")
                other.close()

            # Delete the line for good, choosing to drop the card line that cites its conversation.
            self._open_confirmation(page, expect)
            box = page.locator(f"#actions-{self.said.mid}")
            expect(box).to_contain_text("Has a cat called Tofu")
            expect(box).to_contain_text("Replies of the companion that quote it")
            shot(box, "delete-confirm-1280-en")
            box.locator("label").filter(has_text="Has a cat called Tofu").locator("input[type=checkbox]").check()
            box.get_by_role("button", name="Delete all of it for good").click()
            expect(page.locator(".msg-actions.gone")).to_contain_text("Deleted for good")
            page.goto(f"{url}/card/")
            sections = page.locator("#previously-on .card-section")
            expect(sections.filter(has_text="Tofu")).to_have_count(0)
            expect(sections.filter(has_text="Moved to Lyon in 2026")).to_have_count(1)
            shot(page, "card-after-forget-1280-en", full_page=True)
            browser.close()

        facts = [f.text for f in parse(Card.objects.get(profile=self.profile).text).facts]
        assert facts == ["Moved to Lyon in 2026"]
        # The line and the reply quoting it are gone (a welcome-back line of the live server may stay).
        assert not Message.objects.filter(profile=self.profile, mid__in=[self.said.mid, "a_1760000000000_r1"]).exists()
        assert Tombstone.objects.filter(profile=self.profile, kind="msg").count() == 2
        triggers = list(EvolutionRun.objects.filter(profile=self.profile).order_by("pk").values_list("trigger", flat=True))
        assert triggers == ["hand_edit", "hand_edit", "hand_edit", "forget"]

    def _open_confirmation(self, page, expect):
        page.goto(f"{self.live_server_url}/p/owner/messages/")
        page.wait_for_function("() => window.htmx")
        page.locator(f"#actions-{self.said.mid} button.danger").click()
        expect(page.locator(f"#actions-{self.said.mid} .refs-card")).to_be_visible()
