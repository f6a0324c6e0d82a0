"""Issue 17's chat in a real browser, one journey per point, each in Chinese and English with
screenshots at 1280 and 390 px under var/test-artifacts/ (chat17-<point>-<lang>-<width>.png):
Markdown replies (U1), stop (U2), regenerate (U2), edit and resend (U2), why this reply (U4),
guardrails: a busy companion and the login lock-out (S3). The page's CSP reports nothing."""

import sqlite3
import time
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection

from memory.archive import archive_message
from memory.models import Message, Profile
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import SHOTS, LiveChatServer, shot
from tests.llm_server import Turn

LANGS = {"en": "en-GB", "zh": "zh-CN"}
MARKDOWN = (
    "## Plan 计划\n\n- **tea** first\n- then *a walk* 🌿\n\n| day | what |\n|---|---|\n| Mon | 海边 |\n\n"
    "```python\nprint('hi <b>')\n```\n\nSee [the docs](https://example.com/docs) or [this](javascript:alert(1))."
)
WORDS = {
    "en": {"stopped": "stopped", "why": "Why this reply", "busy": "still answering", "locked": "Login locked for now",
           "copied": "Copied"},
    "zh": {"stopped": "已停止", "why": "为什么这样回复", "busy": "还在回复", "locked": "暂时无法登录",
           "copied": "已复制"},
}


class Chat17Server(LiveChatServer):
    """The helpers of the journeys below (no tests of its own)."""

    default_turn = Turn(chunks=["Okay", " 🙂"])

    def account(self, name: str, lang: str) -> Profile:
        user = self.make_user(name, f"pw-{name}-12345")
        return Profile.objects.create(user=user, key="owner", name="Mochi", language=lang)

    def open_chat(self, p, name: str, lang: str, *, width: int = 1280):
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": width, "height": 860}, locale=LANGS[lang])
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=self.live_server_url)
        page = context.new_page()
        page.csp_errors = []
        page.on("console", lambda msg: "Content Security Policy" in msg.text and page.csp_errors.append(msg.text))
        self.log_in(page, name)
        return browser, context, page

    def log_in(self, page, name: str):
        page.goto(f"{self.live_server_url}/login/")
        page.fill("#id_username", name)
        page.fill("#id_password", f"pw-{name}-12345")
        page.click("main button[type=submit]")
        try:
            page.wait_for_selector("#composer-text")
        except Exception as error:
            # Now and then in a full run the chat never came: the server said "Please enter a
            # correct username and password" for a user this process had just made. Say which
            # side missed the row: this connection's transaction state, and whether a fresh
            # connection to the same file sees the user.
            raise AssertionError(f"{name} was not let in: at {page.url}, the page said "
                                 f"{page.inner_text('body')[:600]!r}; {self.row_visibility(name)}") from error
        page.wait_for_function("() => window.htmx && document.querySelector('[ws-connect]')")
        page.wait_for_timeout(400)  # let the socket open

    @staticmethod
    def row_visibility(name: str) -> str:
        said = f"test process: in_atomic_block={connection.in_atomic_block}"
        if connection.vendor == "sqlite":
            raw = connection.connection
            said += f", sqlite in_transaction={raw.in_transaction if raw else None}"
            fresh = sqlite3.connect(connection.settings_dict["NAME"])
            try:
                seen = fresh.execute("SELECT count(*) FROM auth_user WHERE username = ?", [name]).fetchone()[0]
            finally:
                fresh.close()
            said += f", a fresh connection sees the user: {bool(seen)} (file {connection.settings_dict['NAME']})"
        return said

    def shot(self, page, name: str, lang: str, *, prefix: str = "chat17"):
        if not SHOTS:
            return
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 860})
            page.wait_for_timeout(150)
            shot(page, f"{prefix}-{name}-{lang}-{width}")
        page.set_viewport_size({"width": 1280, "height": 860})

    def say(self, page, text: str):
        page.fill("#composer-text", text)
        page.press("#composer-text", "Enter")

    # One journey per class below: each class has its own server process, as the other browser
    # tests do (a second test on the same live server does not see the users it creates).

    # --- U1 ---------------------------------------------------------------------------------

    def journey_markdown_replies_with_code_copy(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            self.account(f"md{lang}", lang)
            self.llm.script(Turn(chunks=[MARKDOWN[:30], MARKDOWN[30:90], MARKDOWN[90:]], chunk_delay=0.05))
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"md{lang}", lang)
                self.say(page, "**plain** <i>user</i> text 你好")
                reply = page.locator(".msg.assistant:not(.streaming) .content.md")
                expect(reply.locator("h2")).to_have_text("Plan 计划", timeout=10_000)
                expect(reply.locator("li strong")).to_have_text("tea")
                expect(reply.locator("table td").nth(1)).to_have_text("海边")
                link = reply.locator("a")
                expect(link).to_have_count(1)  # the javascript: link stays text
                assert link.get_attribute("rel") == "noopener noreferrer"
                expect(page.locator(".msg.user .content")).to_have_text("**plain** <i>user</i> text 你好")
                assert page.locator(".msg.user strong, .msg.user i").count() == 0
                page.click(".code-block .copy-code")
                expect(page.locator(".code-block .copy-code")).to_have_text(WORDS[lang]["copied"])
                assert page.evaluate("navigator.clipboard.readText()") == "print('hi <b>')\n"
                self.shot(page, "1-markdown", lang)
                assert page.csp_errors == []
                browser.close()
            assert Message.objects.get(profile__user__username=f"md{lang}", speaker="assistant").content == MARKDOWN

    # --- U2: stop ----------------------------------------------------------------------------

    def journey_stop_with_the_button_or_esc(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            self.account(f"stop{lang}", lang)
            slow = Turn(chunks=[f"step {i}. " for i in range(60)], chunk_delay=0.15)
            self.llm.script(slow, slow)
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"stop{lang}", lang)
                self.say(page, "count slowly 慢慢数")
                expect(page.locator(".msg.streaming .stop-button")).to_be_visible(timeout=10_000)
                page.wait_for_function("() => document.querySelector('.msg.streaming .content').textContent.includes('step 3')")
                self.shot(page, "2-streaming", lang)
                pressed = time.monotonic()
                page.keyboard.press("Escape")
                stopped = page.locator(".msg.assistant.stopped")
                expect(stopped).to_have_count(1, timeout=5_000)
                print(f"[{lang}] Esc → stopped line shown: {(time.monotonic() - pressed) * 1000:.0f} ms")
                expect(stopped.locator(".stopped-flag")).to_have_text(WORDS[lang]["stopped"])
                # The button does the same.
                self.say(page, "again 再来")
                page.wait_for_function("() => document.querySelector('.msg.streaming .content') && document.querySelector('.msg.streaming .content').textContent.includes('step 2')")
                pressed = time.monotonic()
                page.click(".msg.streaming .stop-button")
                expect(page.locator(".msg.assistant.stopped")).to_have_count(2, timeout=5_000)
                print(f"[{lang}] Stop button → stopped line shown: {(time.monotonic() - pressed) * 1000:.0f} ms")
                self.shot(page, "2-stopped", lang)
                assert page.csp_errors == []
                browser.close()
            stored = list(Message.objects.filter(profile__user__username=f"stop{lang}", speaker="assistant").values_list("status", "content"))
            assert [s for s, _ in stored] == ["stopped", "stopped"]
            assert all(c.startswith("step 0.") and "step 59" not in c for _, c in stored)

    # --- U2: regenerate ------------------------------------------------------------------------

    def journey_regenerate_and_browse_the_alternatives(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            self.account(f"regen{lang}", lang)
            # After each reply the model's look at the turn (K10) takes the next scripted answer.
            self.llm.script(Turn(chunks=["Answer one 一"]), Turn(chunks=["{}"]), Turn(chunks=["Answer two 二"]))
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"regen{lang}", lang)
                self.say(page, "give me an idea 给个主意")
                expect(page.locator(".msg.assistant .content")).to_have_text("Answer one 一", timeout=10_000)
                page.click(".msg.assistant .regen button")
                expect(page.locator(".msg.assistant:not(.streaming) .content")).to_have_text("Answer two 二", timeout=10_000)
                expect(page.locator(".msg.assistant .alt-count")).to_have_text("2 / 2")
                page.click(".msg.assistant .alternatives form.alt:first-of-type button")
                expect(page.locator(".msg.assistant .content")).to_have_text("Answer one 一")
                expect(page.locator(".msg.assistant .alt-count")).to_have_text("1 / 2")
                self.shot(page, "3-alternatives", lang)
                page.reload()
                page.wait_for_selector("#composer-text")
                expect(page.locator(".msg.assistant .content")).to_have_text("Answer one 一")  # the chosen one stays chosen
                expect(page.locator(".msg.assistant .alt-count")).to_have_text("1 / 2")
                assert page.csp_errors == []
                browser.close()

    # --- U2: edit and resend -----------------------------------------------------------------

    def journey_edit_and_resend_the_last_line(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            self.account(f"edit{lang}", lang)
            self.llm.script(Turn(chunks=["Cats are great"]), Turn(chunks=["{}"]), Turn(chunks=["Dogs are great 🐶"]))
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"edit{lang}", lang)
                self.say(page, "tell me about cats 猫")
                expect(page.locator(".msg.assistant .content")).to_have_text("Cats are great", timeout=10_000)
                page.click(".msg.user .edit-line")
                expect(page.locator("#composer-text")).to_have_value("tell me about cats 猫")
                expect(page.locator("#composer.editing")).to_have_count(1)
                self.shot(page, "4-editing", lang)
                self.say(page, "tell me about dogs 狗")
                expect(page.locator(".msg.assistant:not(.streaming) .content")).to_have_text("Dogs are great 🐶", timeout=10_000)
                expect(page.locator(".msg.user .content")).to_have_text("tell me about dogs 狗")
                self.shot(page, "4-edited", lang)
                assert page.csp_errors == []
                browser.close()
            user_lines = Message.objects.filter(profile__user__username=f"edit{lang}", speaker="user").order_by("created_at")
            assert [(m.content, m.deleted_at is None) for m in user_lines] == [("tell me about cats 猫", False), ("tell me about dogs 狗", True)]

    # --- U4: why this reply --------------------------------------------------------------------

    def journey_why_this_reply(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            profile = self.account(f"why{lang}", lang)
            Profile.objects.filter(pk=profile.pk).update(proactive_enabled=False)  # no welcome-back after the old line
            remembered = archive_message(
                profile=profile, mid="c_00000000000000aa", speaker="user",
                content="My cat Mochi loves the sun 我的猫 Mochi 喜欢晒太阳", created_at=datetime(2025, 3, 1, 9, tzinfo=UTC),
            ).message
            # The old line's conversation closes when the new one starts, and its card run calls
            # the model too: every call gets this answer.
            self.llm.default = Turn(chunks=["Mochi is lucky ☀️"])
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"why{lang}", lang)
                page.evaluate("document.querySelector('#older') && document.querySelector('#older').remove()")
                self.say(page, "how is Mochi the cat 猫?")
                expect(page.locator(".msg.assistant:not(.streaming) .content").last).to_have_text("Mochi is lucky ☀️", timeout=10_000)
                page.click(".msg.assistant:last-of-type .why-link")
                panel = page.locator(".msg.assistant:last-of-type .why")
                expect(panel).to_be_visible()
                expect(panel.locator("h3")).to_have_text(WORDS[lang]["why"])
                link = panel.locator(".why-list a").first
                expect(link).to_have_attribute("href", f"/slices/{remembered.slice.key}/?profile=owner#msg-c_00000000000000aa")
                expect(panel).to_contain_text("Mochi loves the sun")
                panel.scroll_into_view_if_needed()
                self.shot(page, "6-why", lang)
                link.click()
                expect(page.locator("#msg-c_00000000000000aa")).to_be_visible()
                assert page.csp_errors == []
                browser.close()
            sent = next(r for r in self.llm.requests if r.get("stream") and "how is Mochi" in r["messages"][-1]["content"])
            assert "Mochi loves the sun" in sent["messages"][0]["content"]  # what the panel names is what the model received

    # --- S3: a busy companion across tabs; the login lock-out ------------------------------------

    def journey_guardrails(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            self.account(f"guard{lang}", lang)
            self.llm.script(Turn(chunks=[f"line {i} " for i in range(60)], chunk_delay=0.15))
            with sync_playwright() as p:
                browser, context, page = self.open_chat(p, f"guard{lang}", lang)
                other = context.new_page()
                other.goto(self.live_server_url + "/")
                other.wait_for_function("() => window.htmx && document.querySelector('[ws-connect]')")
                other.wait_for_timeout(400)
                self.say(page, "a long answer please")
                expect(page.locator(".msg.streaming .stop-button")).to_be_visible(timeout=10_000)
                self.say(other, "meanwhile in tab two 第二个标签页")
                expect(other.locator("#notices .notice")).to_contain_text(WORDS[lang]["busy"], timeout=5_000)
                expect(other.locator("#composer-text")).to_have_value("meanwhile in tab two 第二个标签页")
                expect(other.locator(".msg.user")).to_have_count(0)
                self.shot(other, "10-busy", lang)
                page.keyboard.press("Escape")
                expect(page.locator(".msg.assistant.stopped")).to_have_count(1, timeout=5_000)
                assert page.csp_errors == []
                browser.close()


    # --- U3: the line menu ------------------------------------------------------------------

    def journey_line_menu(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            profile = self.account(f"menu{lang}", lang)
            self.llm.script(Turn(chunks=["Mochi sleeps all day 😴"]), Turn(chunks=["{}"]))
            with sync_playwright() as p:
                browser, _, page = self.open_chat(p, f"menu{lang}", lang)
                self.say(page, "my cat Mochi 我的猫")
                expect(page.locator(".msg.assistant:not(.streaming) .content")).to_have_text("Mochi sleeps all day 😴", timeout=10_000)
                reply = page.locator(".msg.assistant").last
                # Keyboard: focus the menu's summary, open it with Enter.
                reply.locator("details.line-menu > summary").focus()
                page.keyboard.press("Enter")
                expect(reply.locator("details.line-menu")).to_have_attribute("open", "")
                # Select a part of the line, then favourite: the selection is the excerpt.
                page.evaluate("""() => { const el = [...document.querySelectorAll('.msg.assistant .content p')].pop();
                    const text = el.firstChild; const r = document.createRange(); r.setStart(text, 0); r.setEnd(text, 5);
                    const s = getSelection(); s.removeAllRanges(); s.addRange(r); }""")
                page.wait_for_timeout(100)
                reply.locator(".fav-form button[type=submit]").click()
                page.wait_for_timeout(600)
                self.shot(page, "5-menu", lang)
                # Long-press on touch opens the menu of the user's line; hide it from there.
                user_line = page.locator(".msg.user").last
                user_line.locator(".bubble").dispatch_event("touchstart", {"touches": [], "changedTouches": []})
                page.wait_for_timeout(800)
                expect(user_line.locator("details.line-menu")).to_have_attribute("open", "")
                user_line.locator("form[action$='/hide/'] button").click()
                expect(user_line).to_have_class("msg user hidden", timeout=5_000)
                self.shot(page, "5-hidden", lang)
                assert page.csp_errors == []
                browser.close()
            fav = profile.favourites.get()
            assert fav.highlight.content == "Mochi"
            assert Message.objects.get(profile=profile, speaker="user").deleted_at is not None

@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class MarkdownRepliesInTheBrowser(Chat17Server):
    def test_markdown_replies_with_code_copy(self):
        self.journey_markdown_replies_with_code_copy()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class StopInTheBrowser(Chat17Server):
    def test_stop_with_the_button_or_esc(self):
        self.journey_stop_with_the_button_or_esc()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class RegenerateInTheBrowser(Chat17Server):
    def test_regenerate_and_browse_the_alternatives(self):
        self.journey_regenerate_and_browse_the_alternatives()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class EditAndResendInTheBrowser(Chat17Server):
    def test_edit_and_resend_the_last_line(self):
        self.journey_edit_and_resend_the_last_line()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class WhyThisReplyInTheBrowser(Chat17Server):
    def test_why_this_reply(self):
        self.journey_why_this_reply()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class BusyCompanionInTheBrowser(Chat17Server):
    def test_a_second_tab_is_told_the_companion_is_busy(self):
        self.journey_guardrails()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class LineMenuInTheBrowser(Chat17Server):
    def test_copy_favourite_a_part_and_hide_from_the_line_menu(self):
        self.journey_line_menu()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class LoginLockOutInTheBrowser(Chat17Server):
    """Its own server process: a lock-out of this address must not touch the journeys above."""

    def test_login_lock_out_is_explained(self):
        from playwright.sync_api import expect, sync_playwright

        for lang in LANGS:
            self.account(f"lock{lang}", lang)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
                login = browser.new_page(viewport={"width": 1280, "height": 860}, locale=LANGS[lang])
                for _ in range(settings.AXES_FAILURE_LIMIT):
                    login.goto(f"{self.live_server_url}/login/")
                    login.fill("#id_username", f"lock{lang}")
                    login.fill("#id_password", "wrong")
                    with login.expect_navigation():
                        login.click("main button[type=submit]")
                expect(login.locator("h1")).to_have_text(WORDS[lang]["locked"])
                self.shot(login, "10-locked", lang)
                browser.close()
