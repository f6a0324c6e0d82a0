"""The memory pages in a real browser (issue 8): create a companion, chat two conversations,
search the archive, open the hit's conversation with the line in view, open the card at
its end ("Previously On"), open the timeline. Screenshots (`make shots`) land in var/test-artifacts/.

Same set-up as test_chat_browser.py: Channels' live server (Daphne in a child process)
and a local OpenAI-compatible server; all ORM work stays outside the Playwright block.
"""


import pytest

from memory.models import Message, Profile, Slice
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in, shot
from tests.llm_server import Turn


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class MemoryPagesInTheBrowser(LiveChatServer):
    # Every call (chat replies, the analyzer, the card agent) gets the same plain reply.
    default_turn = Turn(chunks=["I'll ", "remember ", "that."])

    def test_profile_chat_search_slice_card_timeline(self):
        from playwright.sync_api import expect, sync_playwright

        self.make_user("mei", "pw-mei-12345")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 800}, locale="en-GB")
            log_in(page, self.live_server_url, "mei", "pw-mei-12345")

            # A new companion, from the Profiles page; it becomes the current one.
            page.click("nav.mainnav >> text=Profiles")
            page.fill("#id_key", "sea")
            page.fill("#id_name", "Sea")
            page.fill("#id_persona", "You are Sea, a calm friend who loves the coast.")
            page.select_option("#id_language", "en")
            page.click("text=Create companion")
            expect(page.locator(".profile-row.current h2")).to_contain_text("Sea")
            expect(page.locator("#nav-profile")).to_have_value("sea")
            shot(page, "memory-1-profiles", full_page=True)

            # Two conversations.
            page.click("nav.mainnav >> text=Chat")
            page.wait_for_selector('[ws-connect="/ws/chat/sea/"]')
            page.wait_for_function("() => window.htmx")
            page.wait_for_timeout(400)  # let the socket open
            page.fill("#composer-text", "I walked on the beach at sunset 🌅")
            page.press("#composer-text", "Enter")
            expect(page.locator(".msg.assistant:not(.streaming) .content")).to_have_count(1, timeout=10_000)
            page.click("text=New conversation")
            expect(page.locator(".slice-divider")).not_to_have_count(0)
            page.fill("#composer-text", "My sister visits next week")
            page.press("#composer-text", "Enter")
            expect(page.locator(".msg.assistant:not(.streaming) .content")).to_have_count(2, timeout=10_000)

            # Search the archive (htmx swaps the results in; the URL follows).
            page.click("nav.mainnav >> text=Memory")
            page.fill("#id_q", "beach")
            page.press("#id_q", "Enter")
            hit = page.locator(".hit").filter(has_text="sunset")
            expect(hit).to_have_count(1)
            expect(hit.locator("mark")).to_have_text("beach")
            assert "q=beach" in page.url
            shot(page, "memory-2-archive", full_page=True)

            # The hit opens its conversation with the line in view and highlighted.
            hit.locator("text=open conversation").click()
            target = page.locator(".transcript .line:target")
            expect(target).to_contain_text("I walked on the beach at sunset")
            assert "#msg-c_" in page.url
            shot(page, "memory-3-slice", full_page=True)

            # "Previously On" at that slice.
            page.click("text=The card at the end of this slice")
            expect(page.locator("#previously-on")).to_contain_text("The card as it was when slice")
            shot(page, "memory-4-card-at-slice", full_page=True)

            # The timeline: both conversations, the first closed by "new conversation".
            page.click("nav.mainnav >> text=Timeline")
            expect(page.locator(".slice-row")).to_have_count(2)
            expect(page.locator(".slice-row").last).to_contain_text("new conversation")
            shot(page, "memory-5-timeline", full_page=True)

            # The same pages at phone width, in Chinese.
            phone = browser.new_page(viewport={"width": 390, "height": 800}, locale="zh-CN")
            phone.context.add_cookies(page.context.cookies())
            phone.goto(f"{self.live_server_url}/archive/?q=%E6%B5%B7%E8%BE%B9+beach")
            expect(phone.locator("nav.mainnav")).to_contain_text("时间线")
            shot(phone, "memory-6-archive-phone-zh", full_page=True)
            phone.goto(f"{self.live_server_url}/beliefs/")
            shot(phone, "memory-7-beliefs-phone-zh", full_page=True)
            browser.close()

        sea = Profile.objects.get(user__username="mei", key="sea")
        assert Slice.objects.filter(profile=sea).count() == 2
        assert Message.objects.filter(profile=sea, speaker="user").count() == 2
