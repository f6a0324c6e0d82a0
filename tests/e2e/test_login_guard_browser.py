"""Issue 24 point 8 and issue 25 point 5 in a real browser: the page a login gets past
PREVIOUSLY_LOGIN_ADDRESS_FAILURES from one address, and the admin's read-only card with the way
to the card page. Screenshots at 1280 and 390 px, English and Chinese, light and dark, in
var/test-artifacts/."""


import pytest
from django.conf import settings

from memory.card import render
from memory.card.format import Card as ParsedCard
from memory.card.format import Fact
from memory.models import Card, Profile
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, shot


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class LoginGuardInTheBrowser(LiveChatServer):
    @classmethod
    def setUpClass(cls):
        cls._limit = settings.PREVIOUSLY_LOGIN_ADDRESS_FAILURES
        settings.PREVIOUSLY_LOGIN_ADDRESS_FAILURES = 1  # the server process is forked with it
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        settings.PREVIOUSLY_LOGIN_ADDRESS_FAILURES = cls._limit

    def test_the_throttled_login_page_and_the_read_only_card_in_the_admin(self):
        from playwright.sync_api import expect, sync_playwright

        staff = self.make_user("root", "pw-root-12345")
        staff.is_staff = staff.is_superuser = True
        staff.save()
        profile = Profile.objects.create(user=staff, key="owner", name="Mochi")
        row = Card.objects.create(profile=profile, version=1, text=render(ParsedCard(
            portrait="Mei moved to Lyon for the pottery school.",
            facts=(Fact("Close to her sister", ("you",)),))))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            for n, (lang, width, scheme) in enumerate([("en-GB", 1280, "light"), ("en-GB", 390, "dark"),
                                                       ("zh-CN", 1280, "dark"), ("zh-CN", 390, "light")]):
                page = browser.new_page(viewport={"width": width, "height": 900}, locale=lang, color_scheme=scheme)
                for _ in range(2 if n == 0 else 1):  # the first failure is counted, the next refused
                    page.goto(f"{self.live_server_url}/login/")
                    page.fill("#id_username", "nobody")
                    page.fill("#id_password", "guess")
                    page.click("button[type=submit]")
                    page.wait_for_load_state()
                expect(page.locator("h1")).to_contain_text("登录失败次数过多" if lang == "zh-CN" else "Too many failed logins")
                shot(page, f"login-throttled-{lang}-{width}-{scheme}", full_page=True)
                page.close()
            for lang in ("en-GB", "zh-CN"):
                page = browser.new_page(viewport={"width": 1280, "height": 900}, locale=lang)
                page.goto(f"{self.live_server_url}/admin/login/?next=/admin/memory/card/{row.pk}/change/")
                page.fill("#id_username", "root")
                page.fill("#id_password", "pw-root-12345")
                page.click("input[type=submit]")
                page.wait_for_load_state()
                expect(page.locator(f'a[href="/card/?profile={profile.key}"]')).to_be_visible()
                expect(page.locator('textarea[name="text"]')).to_have_count(0)
                shot(page, f"admin-card-read-only-{lang}-1280", full_page=True)
                page.close()
            browser.close()
