"""Issue 15 in a real browser: from a conversation's page the person deletes the whole
conversation for good and chooses to drop one card line that cites it (D6, D7). Screenshots
of the confirmation at 1280 and 390 px, English and Chinese, land in var/test-artifacts/."""

from datetime import UTC, datetime, timedelta

import pytest

from memory.card import parse, render
from memory.card.format import Card as ParsedCard
from memory.card.format import Fact
from memory.models import Card, EvolutionRun, Message, Profile, Slice, Tombstone
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import SHOTS, LiveChatServer, log_in, shot
from tests.factories import HighlightFactory, MessageFactory, SliceFactory

AT = datetime(2026, 8, 17, 5, 15, tzinfo=UTC)
SAID = "I adopted a cat named Tofu last spring, she sleeps on my keyboard 🐱"


def conversation(profile, key, at, lines):
    slice_ = SliceFactory(profile=profile, key=key, started_at=at, last_message_at=at, tz="UTC")
    for k, (mid, speaker, text) in enumerate(lines):
        MessageFactory(profile=profile, slice=slice_, speaker=speaker, mid=mid, content=text,
                       created_at=at + timedelta(minutes=k))
    slice_.close(reason=Slice.CloseReason.GAP, at=at + timedelta(minutes=len(lines)))
    return slice_


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class SliceForgetInTheBrowser(LiveChatServer):
    def setUp(self):
        user = self.make_user("mei", "pw-mei-12345")
        self.profile = Profile.objects.create(user=user, key="owner", name="Sea", language="en")
        self.slice = conversation(self.profile, "2026-08-17-0515", AT, [
            ("c_00000000000000c1", "user", SAID),
            ("a_1760000000000_r1", "assistant", "A keyboard cat! What colour is she?"),
            ("c_00000000000000c2", "user", "Orange, with one white paw"),
        ])
        later = conversation(self.profile, "2026-08-18-0900", AT + timedelta(days=1), [
            ("c_00000000000000d1", "user", "Back from pottery class"),
            ("a_1760000000000_r2", "assistant", f"Earlier you told me: {SAID}"),
        ])
        HighlightFactory(message=Message.objects.get(mid="c_00000000000000c1"), hid="h_tofu")
        Card.objects.create(profile=self.profile, version=1, text=render(ParsedCard(facts=(
            Fact("Has a cat called Tofu", (self.slice.ref,)),
            Fact("The cat is ginger-coloured", (self.slice.ref,)),
            Fact("Goes to pottery class", (later.ref,)),
        ))))
        self.mids = ["c_00000000000000c1", "a_1760000000000_r1", "c_00000000000000c2"]

    def test_delete_the_conversation_and_one_citing_card_line(self):
        from playwright.sync_api import expect, sync_playwright

        url = self.live_server_url
        slice_url = f"{url}/slices/{self.slice.key}/?profile=owner"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="en-GB")
            log_in(page, url, "mei", "pw-mei-12345")

            page.goto(slice_url)
            page.get_by_role("link", name="Delete this conversation for good").click()
            expect(page.get_by_role("heading", level=1)).to_have_text("Delete this conversation for good?")
            card = page.locator(".refs-card")
            expect(card).to_contain_text("Has a cat called Tofu")
            expect(card).to_contain_text("The cat is ginger-coloured")
            expect(card).not_to_contain_text("Goes to pottery class")
            expect(page.locator(".refs-replies")).to_contain_text("Earlier you told me")
            shot(page, "slice-delete-confirm-1280-en", full_page=True)
            confirm_url = page.url

            # Cancel is a plain link back to the conversation; nothing went.
            page.get_by_role("link", name="Cancel").click()
            expect(page).to_have_url(slice_url)
            for mid in self.mids:
                expect(page.locator(f"#msg-{mid}")).to_be_visible()

            cookies = page.context.cookies()
            every = ((1280, "zh-CN", "1280-zh"), (390, "en-GB", "390-en"), (390, "zh-CN", "390-zh"))
            # Every look under `make shots`; else the two that hold both languages and both widths.
            for width, locale, tag in (every if SHOTS else every[:2]):
                other = browser.new_page(viewport={"width": width, "height": 900}, locale=locale)
                other.context.add_cookies(cookies)
                other.goto(confirm_url)
                expect(other.locator(".refs-card")).to_be_visible()
                shot(other, f"slice-delete-confirm-{tag}", full_page=True)
                other.close()

            page.goto(confirm_url)
            page.locator(".refs-card label").filter(has_text="Has a cat called Tofu").locator("input[type=checkbox]").check()
            page.get_by_role("button", name="Delete this conversation for good").click()
            expect(page.locator(".flash")).to_contain_text("Conversation 2026/08/17/0515 and its 3 lines were deleted for good.")
            expect(page.locator(".flash")).to_contain_text("1 line of the card went with it.")
            assert "/timeline/" in page.url
            shot(page, "slice-deleted-timeline-1280-en", full_page=True)
            assert page.goto(slice_url).status == 404
            page.goto(f"{url}/card/")
            sections = page.locator("#previously-on .card-section")
            expect(sections.filter(has_text="Has a cat called Tofu")).to_have_count(0)
            expect(sections.filter(has_text="The cat is ginger-coloured")).to_have_count(1)
            browser.close()

        assert not Slice.objects.filter(pk=self.slice.pk).exists()
        assert not Message.objects.filter(mid__in=self.mids + ["a_1760000000000_r2"]).exists()
        stones = set(Tombstone.objects.filter(profile=self.profile, kind="msg").values_list("object_id", flat=True))
        assert stones == {*self.mids, "a_1760000000000_r2"}  # the quoting reply went too (not kept)
        assert Tombstone.objects.filter(profile=self.profile, kind="hl", object_id="h_tofu").exists()
        facts = [f.text for f in parse(Card.objects.get(profile=self.profile).text).facts]
        assert facts == ["The cat is ginger-coloured", "Goes to pottery class"]
        run = EvolutionRun.objects.get(profile=self.profile, trigger="forget")
        assert "-- Has a cat called Tofu" in run.diff
