"""Issue 17 points 8 and 9 in a real browser: every page family at 1280 and 390 px, in zh and
en, light and dark, saved under var/test-artifacts/looks-*.png; nothing wider than a phone at
390 px; one-row navigation at 1280 px; the phone menu; the theme toggle persisted with no
flash; the companion and language menus acting on selection; visible focus; reduced motion;
and the settings page saving a model the model server lists."""

from datetime import UTC, datetime

import pytest

from memory.archive import archive_message
from memory.models import Card, EvolutionRun, Profile, Slice
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in, looks, shot
from tests.factories import CardSnapshotFactory, ExperienceFactory, HighlightFactory
from tests.llm_server import Turn
from tests.memory.card.samples import SEED_CARD

LINES = [
    ("user", "今天早上跑了 5 公里 🏃 felt great"),
    ("assistant", "太棒了！Five kilometres before work is no small thing. 下次想试试更长的距离吗？"),
    ("user", "My sister 小雨 visits next week; we plan to hike Xiangshan 香山."),
    ("assistant", "That sounds lovely — 香山的秋天很美。I'll remember she is coming."),
]


def seed(user) -> tuple[Profile, str]:
    """A companion with two conversations, a card, a snapshot, a highlight and an experience."""
    sea = Profile.objects.create(user=user, key="owner", name="小海 Sea", language="zh",
                                 persona="你是小海，一个温和的朋友。")
    Profile.objects.create(user=user, key="work", name="Coach", language="en")
    n = 0
    for day, conversation in ((16, LINES[:2]), (17, LINES[2:])):
        for speaker, text in conversation:
            n += 1
            mid = f"c_{n:016x}" if speaker == "user" else f"a_{1786000000000 + n}_abc{n:03d}"
            archive_message(profile=sea, mid=mid, speaker=speaker, content=text, tz="Asia/Shanghai",
                            created_at=datetime(2026, 8, day, 14, 10 + n, tzinfo=UTC), new_conversation=(n == 3))
    first = Slice.objects.filter(profile=sea).order_by("started_at").first()
    Card.objects.update_or_create(profile=sea, defaults={"text": SEED_CARD})
    CardSnapshotFactory(slice=first, text=SEED_CARD)
    EvolutionRun.objects.create(profile=sea, slice=first, trigger="slice_close", status="changed",
                                summary="Noted the morning run.", diff="+- Runs 5 km before work [2026/08/16/2211]")
    message = sea.messages.filter(speaker="user").first()
    HighlightFactory(message=message)
    ExperienceFactory(profile=sea, title="跑步 Morning run", content="Ran 5 km before work; felt great.")
    return sea, first.key


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class LooksInTheBrowser(LiveChatServer):
    default_turn = Turn(chunks=["好的", "，I'll remember."])

    def test_every_page_family_in_both_languages_themes_and_widths(self):
        from playwright.sync_api import expect, sync_playwright

        user = self.make_user("mei", "pw-mei-12345")
        sea, slice_key = seed(user)
        self.llm.models = ["qwen2.5:7b", "llama3.1:8b"]
        pages = {
            "chat": "/",
            "archive": "/archive/?q=%E9%A6%99%E5%B1%B1",
            "timeline": "/timeline/",
            "slice": f"/slices/{slice_key}/",
            "card": "/card/",
            "beliefs": "/beliefs/",
            "profiles": "/profiles/",
            "settings": "/profiles/owner/edit/",
            "data": "/data/",
            "curation": "/p/owner/experiences/",
            "curation-lines": "/p/owner/messages/",
            "about": "/about/",
        }
        overflow: list[str] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            login = browser.new_context(viewport={"width": 1280, "height": 800})
            page = login.new_page()
            log_in(page, self.live_server_url, "mei", "pw-mei-12345", submit="main button[type=submit]")
            cookies = login.cookies()

            for theme, lang, locale, width in looks():
                ctx = browser.new_context(viewport={"width": width, "height": 860}, locale=locale,
                                          color_scheme=theme)
                tab = ctx.new_page()
                for name, path in (("login", "/login/"),):
                    tab.goto(self.live_server_url + path)
                    shot(tab, f"looks-{name}-{width}-{lang}-{theme}", full_page=True)
                ctx.add_cookies(cookies)
                for name, path in pages.items():
                    tab.goto(self.live_server_url + path)
                    if name == "chat":
                        tab.wait_for_selector(".msg.assistant")
                    wide = tab.evaluate("document.documentElement.scrollWidth")
                    if wide > width:
                        overflow.append(f"{name} {width}px {lang} {theme}: {wide}px wide")
                    shot(tab, f"looks-{name}-{width}-{lang}-{theme}",
                         full_page=name != "chat")
                    bg = tab.evaluate("getComputedStyle(document.body).backgroundColor")
                    assert (bg == "rgb(20, 22, 25)") == (theme == "dark"), (name, theme, bg)
                if width == 1280:
                    # One row: the bar is as tall as one line of controls.
                    height = tab.evaluate("document.querySelector('.topbar').getBoundingClientRect().height")
                    assert height < 64, f"the navigation wraps at 1280 px ({lang}): {height}px"
                ctx.close()
            assert not overflow, "wider than the window:\n" + "\n".join(overflow)

            # The phone menu: collapsed, opened by its button, closed by Esc; the language
            # menu acts on selection.
            phone = browser.new_context(viewport={"width": 390, "height": 800}, locale="en-GB")
            phone.add_cookies(cookies)
            tab = phone.new_page()
            tab.goto(f"{self.live_server_url}/timeline/")
            expect(tab.locator("nav.mainnav")).to_be_hidden()
            tab.click(".nav-toggle")
            expect(tab.locator("nav.mainnav")).to_be_visible()
            expect(tab.locator(".nav-toggle")).to_have_attribute("aria-expanded", "true")
            shot(tab, "looks-menu-open-390-en-light", full_page=True)
            tab.keyboard.press("Escape")
            expect(tab.locator("nav.mainnav")).to_be_hidden()
            expect(tab.locator(".nav-toggle")).to_be_focused()
            tab.click(".nav-toggle")
            expect(tab.locator("#nav-language + button")).to_be_hidden()  # JS: no button needed
            with tab.expect_navigation():
                tab.select_option("#nav-language", "zh-hans")
            expect(tab.locator("h1")).to_contain_text("时间线")
            tab.click(".nav-toggle")
            with tab.expect_navigation():
                tab.select_option("#nav-profile", "work")
            expect(tab.locator("#nav-profile")).to_have_value("work")
            tab.click(".nav-toggle")
            with tab.expect_navigation():
                tab.select_option("#nav-profile", "owner")
            phone.close()

            # The theme toggle: persisted, applied before the first paint on the next page.
            desk = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-GB",
                                       color_scheme="light", reduced_motion="reduce")
            desk.add_cookies(cookies)
            tab = desk.new_page()
            tab.goto(f"{self.live_server_url}/beliefs/")
            toggle = tab.locator(".theme-toggle")
            expect(toggle).to_have_attribute("aria-pressed", "false")
            toggle.click()
            expect(toggle).to_have_attribute("aria-pressed", "true")
            # A function, not an expression: Playwright polls an expression with eval(), which the
            # page's CSP refuses whenever the first look is not yet true (a flake of the full run).
            tab.wait_for_function("() => getComputedStyle(document.body).backgroundColor === 'rgb(20, 22, 25)'",
                                  timeout=2000)
            # Record the theme at the first paint of the next page: set before any content.
            tab.add_init_script(
                "document.addEventListener('readystatechange', () => { if (!window.__firstTheme)"
                " window.__firstTheme = document.documentElement.getAttribute('data-theme') || 'none'; });"
            )
            tab.goto(f"{self.live_server_url}/timeline/")
            assert tab.evaluate("window.__firstTheme") == "dark"
            toggle = tab.locator(".theme-toggle")
            toggle.click()  # back to what the system gives: the choice is forgotten
            assert tab.evaluate("localStorage.getItem('previously-theme')") is None

            # Keyboard: the skip link first, then a visible focus ring on every control.
            tab.goto(f"{self.live_server_url}/timeline/")
            tab.keyboard.press("Tab")
            expect(tab.locator(".skip-link")).to_be_focused()
            tab.keyboard.press("Tab")
            tab.keyboard.press("Tab")
            outline = tab.evaluate("getComputedStyle(document.activeElement).outlineStyle")
            assert outline == "solid", outline
            shot(tab, "looks-focus-1280-en-light")
            # Reduced motion: no transition runs its course.
            duration = tab.evaluate(
                "(() => { const e = document.createElement('div'); e.className = 'htmx-request htmx-indicator';"
                " document.body.append(e); return getComputedStyle(e).transitionDuration; })()"
            )
            assert duration in ("1e-05s", "0.00001s"), duration

            # Settings: the model server's list offered; the choice saved.
            tab.goto(f"{self.live_server_url}/profiles/owner/edit/")
            tab.select_option("#id_model", "llama3.1:8b")
            tab.fill("#id_temperature", "0.5")
            tab.select_option("#id_quiet_from", "22")
            tab.select_option("#id_quiet_until", "7")
            tab.click("form.settings button[type=submit]")
            expect(tab.locator(".flash")).to_contain_text("Saved")
            expect(tab.locator("#id_model")).to_have_value("llama3.1:8b")
            tab.fill("#id_temperature", "9")
            tab.click("form.settings button[type=submit]")
            expect(tab.locator(".field.invalid .errorlist")).to_contain_text("2")
            shot(tab, "looks-settings-error-1280-en-light", full_page=True)
            desk.close()
            browser.close()

        sea.refresh_from_db()
        assert (sea.model, sea.temperature, sea.quiet_from, sea.quiet_until) == ("llama3.1:8b", 0.5, 22, 7)
