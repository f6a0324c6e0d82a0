"""Issue 17 point 7 (conversations at hand) and the 390 px chat page (point 9) in a real
browser, in zh and en, light and dark: the side panel open beside the chat at 1280 px and
collapsed at 390 px, with the composer on screen on load; a past conversation opened in place
(pointer and keyboard), the one on view marked, "Back to now"; sending from a past view goes to
now. Screenshots: var/test-artifacts/conversations-<state>-<width>-<lang>-<theme>.png."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.archive import archive_message
from memory.models import Profile, Slice
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, shot
from tests.llm_server import Turn

LOCALES = {"en": "en-GB", "zh": "zh-CN"}
TALK = {
    "en": [
        ["I ran 5 km before work this morning and it felt great", "Well done! **Five kilometres** before work is no small thing."],
        ["My sister visits next week; we plan to hike Xiangshan", "That sounds lovely. I'll remember she is coming."],
        ["Back from the hike, my legs hurt", "Rest well — and drink water."],
    ],
    "zh": [
        ["今天早上上班前跑了五公里，感觉很好", "太棒了！上班前跑**五公里**可不容易。"],
        ["我妹妹小雨下周来，我们打算去爬香山", "听起来很美，香山的秋天很漂亮。我会记得她要来。"],
        ["爬山回来了，腿好酸", "好好休息，多喝水。"],
    ],
}
WORDS = {
    "en": {"summary": "Conversations", "back": "Back to now", "lines": "2 lines", "four": "4 lines", "note": "What you send goes to the current one"},
    "zh": {"summary": "对话", "back": "回到现在", "lines": "2 条消息", "four": "4 条消息", "note": "发送的内容会进入当前对话"},
}


def seed(user, lang: str) -> list[Slice]:
    """Three conversations: two closed days ago, the last one open a few minutes ago (now)."""
    profile = Profile.objects.create(user=user, key="owner", name="小海 Sea" if lang == "zh" else "Sea", language=lang)
    now = timezone.now()
    starts = [now - timedelta(days=3), now - timedelta(days=1), now - timedelta(minutes=5)]
    for c, (at, pair) in enumerate(zip(starts, TALK[lang], strict=True)):
        for i, text in enumerate(pair):
            n = c * 10 + i
            mid = f"c_{n:016x}" if i == 0 else f"a_{int(at.timestamp() * 1000) + i}_x{n:03d}"
            archive_message(profile=profile, mid=mid, speaker="user" if i == 0 else "assistant", content=text,
                            tz="Asia/Shanghai", created_at=at + timedelta(seconds=30 * i), new_conversation=(c > 0 and i == 0))
    slices = list(Slice.objects.for_profile(profile).order_by("started_at"))
    for s in slices[:-1]:
        s.close(reason="new_conversation")
    return slices


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class ConversationsInTheBrowser(LiveChatServer):
    default_turn = Turn(chunks=["Okay", " 🙂"])

    def test_side_panel_past_conversation_back_to_now_at_1280_and_390(self):
        from playwright.sync_api import expect, sync_playwright

        accounts = {}
        for lang in LOCALES:
            user = self.make_user(f"conv-{lang}", f"pw-conv-{lang}-12345")
            accounts[lang] = seed(user, lang)
        problems: list[str] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            for lang, slices in accounts.items():
                words = WORDS[lang]
                oldest, middle, now = slices
                ctx = browser.new_context(viewport={"width": 1280, "height": 844}, locale=LOCALES[lang])
                page = ctx.new_page()
                csp = []
                page.on("console", lambda msg, csp=csp: "Content Security Policy" in msg.text and csp.append(msg.text))
                page.goto(f"{self.live_server_url}/login/")
                page.fill("#id_username", f"conv-{lang}")
                page.fill("#id_password", f"pw-conv-{lang}-12345")
                page.click("main button[type=submit]")
                page.wait_for_selector("#composer-text")
                page.wait_for_timeout(300)

                def shots(state, width, each_theme=None, page=page, lang=lang):
                    """A screenshot in light and in dark, then back to light."""
                    for theme in ("light", "dark"):
                        page.emulate_media(color_scheme=theme)
                        shot(page, f"conversations-{state}-{width}-{lang}-{theme}")
                        if each_theme:
                            each_theme(theme)
                    page.emulate_media(color_scheme="light")

                def item(s, page=page):
                    return page.locator(f'#conversation-list li[data-key="{s.key}"] > a')

                # --- 1280: the list open beside the chat, newest first, now marked.
                panel = page.locator("details#conversations")
                expect(panel).to_have_attribute("open", "")
                expect(page.locator("#conversations > summary")).to_have_text(words["summary"])
                keys = page.locator("#conversation-list li[data-key]").evaluate_all("els => els.map(e => e.dataset.key)")
                assert keys == [now.key, middle.key, oldest.key], keys
                expect(item(now)).to_have_attribute("aria-current", "true")
                expect(item(middle)).not_to_have_attribute("aria-current", "true")
                expect(item(middle)).to_contain_text(words["lines"])
                expect(item(middle)).to_contain_text(TALK[lang][1][0][:8])
                local = middle.started_at.astimezone(timezone.get_fixed_timezone(480)).strftime("%Y-%m-%d %H:%M")
                expect(item(middle).locator("time")).to_have_text(local)  # the person's zone, not UTC
                shots("now", 1280)

                # Open a past one with the pointer: shown in place, marked, the live list hidden.
                item(middle).click()
                view = page.locator("#past > .past-view")
                expect(view).to_be_visible()
                expect(view).to_contain_text(TALK[lang][1][0])
                expect(page.locator("#messages")).to_be_hidden()
                expect(item(middle)).to_have_attribute("aria-current", "true")
                expect(item(now)).not_to_have_attribute("aria-current", "true")
                expect(page.locator(".past-note")).to_contain_text(words["note"])
                expect(page.locator("#composer-text")).to_be_editable()
                shots("past", 1280)
                view.get_by_role("link", name=words["back"]).first.click()
                expect(view).to_have_count(0)
                expect(page.locator("#messages")).to_be_visible()
                expect(item(now)).to_have_attribute("aria-current", "true")
                expect(page.locator("#composer-text")).to_be_focused()

                # The keyboard: Tab to the oldest one, visible focus, Enter opens it.
                page.locator("#conversations > summary").focus()
                for _ in range(3):
                    page.keyboard.press("Tab")
                    if page.evaluate("document.activeElement.closest('li')?.dataset.key") == oldest.key:
                        break
                assert page.evaluate("document.activeElement.closest('li')?.dataset.key") == oldest.key
                outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
                assert outline != "none", "no visible focus on a conversation"
                page.keyboard.press("Enter")
                expect(view).to_contain_text(TALK[lang][0][0])
                expect(page.locator(".past-title")).to_be_focused()
                # Sending from a past view goes to now, and so does the view.
                page.fill("#composer-text", "hello from the past view")
                page.press("#composer-text", "Enter")
                expect(view).to_have_count(0)
                expect(page.locator("#messages .msg.user").last).to_contain_text("hello from the past view")
                expect(page.locator("#messages .msg.assistant:not(.streaming)").last).to_contain_text("Okay")
                # The list follows: the open conversation now holds four lines, still marked.
                expect(item(now)).to_contain_text(words["four"])
                expect(item(now)).to_have_attribute("aria-current", "true")

                # --- 390 x 844: collapsed; the composer on screen on load; nothing wider than the phone.
                page.set_viewport_size({"width": 390, "height": 844})
                page.goto(self.live_server_url + "/")
                page.wait_for_selector("#composer-text")
                page.wait_for_timeout(300)
                expect(panel).not_to_have_attribute("open", "")
                shots("now", 390, lambda theme, page=page, lang=lang: self._fits(page, 390, 844, f"{lang} {theme} on load", problems))
                page.locator("#conversations > summary").click()
                expect(item(middle)).to_be_visible()
                self._fits(page, 390, 844, f"{lang} list open", problems)
                shots("list", 390)
                item(oldest).click()
                expect(view).to_be_visible()
                expect(panel).not_to_have_attribute("open", "")  # closed again, the conversation in view
                self._fits(page, 390, 844, f"{lang} past", problems)
                shots("past", 390)
                view.get_by_role("link", name=words["back"]).first.click()
                expect(view).to_have_count(0)
                expect(page.locator("#messages")).to_be_visible()
                # The phone's menu button stands for the navigation; the composer stays on screen.
                expect(page.locator(".nav-toggle")).to_be_visible()
                expect(page.locator(".mainnav")).to_be_hidden()
                assert not csp, csp
                ctx.close()

            # Without JavaScript: a past conversation is a link to the chat page showing it; at
            # 390 px the list starts collapsed, at 1280 px it shows.
            ctx = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False, locale="en-GB")
            page = ctx.new_page()
            page.goto(f"{self.live_server_url}/login/")
            page.fill("#id_username", "conv-en")
            page.fill("#id_password", "pw-conv-en-12345")
            page.click("main button[type=submit]")
            page.wait_for_selector("#composer-text")
            expect(page.locator(f'#conversation-list li[data-key="{accounts["en"][0].key}"] > a')).to_be_hidden()
            page.set_viewport_size({"width": 1280, "height": 844})
            page.locator(f'#conversation-list li[data-key="{accounts["en"][0].key}"] > a').click()
            expect(page.locator("#past > .past-view")).to_contain_text(TALK["en"][0][0])
            expect(page.locator("#messages")).to_be_hidden()
            shot(page, "conversations-past-nojs-1280-en-light")
            page.get_by_role("link", name="Back to now").first.click()
            expect(page.locator("#past > .past-view")).to_have_count(0)
            expect(page.locator("#messages")).to_be_visible()
            ctx.close()
            browser.close()
        assert not problems, "\n".join(problems)

    @staticmethod
    def _fits(page, width: int, height: int, what: str, problems: list[str]) -> None:
        box = page.locator("#composer").bounding_box()
        if box is None or box["y"] + box["height"] > height or box["y"] < 0:
            problems.append(f"{what}: the composer is not on screen ({box})")
        wide = page.evaluate("document.documentElement.scrollWidth")
        if wide > width:
            problems.append(f"{what}: {wide}px wide at {width}px")
