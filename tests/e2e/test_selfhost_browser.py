"""Issue 28 in a real browser (SPEC O4, O5, R8): staff connect a model from the connections page
(the local scripted model server) and the chat answers through it without a restart; staff
choose the chat and embedding models among the defaults from the connection's list (issue 28
point 3), and the companion's model from the same list (a model later dropped by the server stays shown with a note); staff
invite a second person, who signs up with the link and changes their password. Screenshots of
every new page at 1280 and 390 px, English and Chinese, light and dark, in var/test-artifacts/."""

from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from memory.models import Connection, Profile, RecallVector
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in
from tests.llm_server import Turn

ARTIFACTS = Path(settings.BASE_DIR) / "var" / "test-artifacts"
LANGS = (("en", "en-GB"), ("zh", "zh-CN"))


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class SelfHostingInTheBrowser(LiveChatServer):
    """No provider is installed: the server starts offline and takes the connection staff choose."""

    default_turn = Turn(chunks=["Connected ", "and listening 👂"])
    connected = False

    @classmethod
    def setUpClass(cls):
        cls._settings = (settings.PREVIOUSLY_LLM_BASE_URL, settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS)
        settings.PREVIOUSLY_LLM_BASE_URL = ""
        settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS = 0
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        settings.PREVIOUSLY_LLM_BASE_URL, settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS = cls._settings

    def test_connect_a_model_invite_someone_and_change_a_password(self):
        from playwright.sync_api import expect, sync_playwright

        root = self.make_user("root", "pw-root-12345")
        get_user_model().objects.filter(pk=root.pk).update(is_staff=True)
        Profile.objects.create(user=root, key="owner", name="Sea", language="en")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        url = self.live_server_url
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            staff = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
            page = staff.new_page()
            log_in(page, url, "root", "pw-root-12345", submit="main button[type=submit]")
            expect(page.locator("#offline-banner")).to_contain_text("Connect a model")

            # Connect: a bad address first (refused by the form), then the local model server.
            self.llm.models.append("fake-embed")
            page.goto(f"{url}/connections/")
            page.fill("#id_base_url", "ftp://127.0.0.1/v1")
            page.get_by_role("button", name="Add", exact=True).click()
            expect(page.locator(".errorlist")).to_contain_text("http:// or https://")
            page.fill("#id_name", "本地 llama.cpp")
            page.fill("#id_base_url", self.llm.base_url)
            page.fill("#id_api_key", "sk-never-shown-9d2e")
            page.get_by_role("button", name="Save", exact=True).click()
            expect(page.locator(".connection")).to_contain_text("key stored")
            expect(page.locator(".connection .models")).to_contain_text("fake-model")
            page.get_by_role("button", name="Test", exact=True).click()
            expect(page.locator(".notice.ok")).to_contain_text("answered in")
            assert "sk-never-shown-9d2e" not in page.content()
            page.select_option("#id_chat_connection", label="本地 llama.cpp")
            page.select_option("#id_chat_model", label="fake-model")  # from the connection's list
            page.get_by_role("button", name="Save the defaults").click()
            expect(page.locator(".flash")).to_contain_text("Defaults saved")

            # Embeddings from the connection (R8): chosen among the defaults.
            page.select_option("#id_embeddings", "openai")
            page.select_option("#id_embedding_connection", label="本地 llama.cpp")
            page.select_option("#id_embedding_model", label="fake-embed")
            page.get_by_role("button", name="Save the defaults").click()
            expect(page.locator(".flash")).to_contain_text("Defaults saved")
            expect(page.locator("#id_embeddings")).to_have_value("openai")
            expect(page.locator("#id_embedding_model option:checked")).to_have_text("fake-embed")

            # The companion's model from the connection's list, the connection named.
            self.llm.models.append("qwen2.5:7b-通义")
            page.goto(f"{url}/profiles/owner/edit/")
            listed = page.locator('#id_model optgroup[label="本地 llama.cpp"] option')
            expect(listed).to_have_text(["fake-embed", "fake-model", "qwen2.5:7b-通义"])  # sorted, as listed
            picked = listed.nth(2).get_attribute("value")
            page.select_option("#id_model", picked)
            page.click("form.settings button[type=submit]")
            expect(page.locator(".flash")).to_contain_text("Saved")
            expect(page.locator("#id_model")).to_have_value(picked)

            # The chat answers through it, with no restart.
            page.goto(f"{url}/")
            expect(page.locator("#offline-banner")).to_have_count(0)
            page.fill("#composer-text", "Are you there? 你在吗")
            page.keyboard.press("Enter")
            expect(page.locator("#messages")).to_contain_text("Connected and listening", timeout=20_000)
            replies = [r for r in self.llm.requests
                       if r.get("stream") and str(r["messages"][-1]["content"]).endswith("Are you there? 你在吗")]
            assert [r["model"] for r in replies] == ["qwen2.5:7b-通义"]
            assert any(r.get("model") == "fake-embed" for r in self.llm.requests)  # the line embedded there

            # The server no longer lists that model: it stays the companion's, with a note.
            self.llm.models.remove("qwen2.5:7b-通义")
            page.goto(f"{url}/profiles/owner/edit/")
            expect(page.locator("#id_model option:checked")).to_contain_text("no longer listed")

            # Invite a second person.
            page.goto(f"{url}/people/")
            page.fill("#id_note", "for Lin 林")
            page.get_by_role("button", name="Make an invitation link").click()
            link = page.locator("code.link-once").inner_text()
            guest = browser.new_context(viewport={"width": 390, "height": 860}, locale="zh-CN").new_page()
            guest.goto(link)
            guest.fill("#id_username", "lin")
            guest.fill("#id_password1", "a-long-pw-9931")
            guest.fill("#id_password2", "a-long-pw-9931")
            guest.locator("main button[type=submit]").click()
            guest.wait_for_selector("#composer-text")

            # Lin changes the password.
            guest.goto(f"{url}/account/password/")
            guest.fill("#id_old_password", "a-long-pw-9931")
            guest.fill("#id_new_password1", "b-longer-pw-4420")
            guest.fill("#id_new_password2", "b-longer-pw-4420")
            guest.locator("main button[type=submit]").click()
            expect(guest.locator("h1")).to_contain_text("账户")

            cookies = staff.cookies()
            for theme in ("light", "dark"):
                for lang, locale in LANGS:
                    for width in (1280, 390):
                        ctx = browser.new_context(viewport={"width": width, "height": 900}, locale=locale,
                                                  color_scheme=theme)
                        ctx.add_cookies(cookies)
                        tab = ctx.new_page()
                        for name, path in (("connections", "/connections/"), ("people", "/people/"),
                                           ("account", "/account/"), ("password", "/account/password/"),
                                           ("delete-account", "/account/delete/"), ("about", "/about/"),
                                           ("companion-settings", "/profiles/owner/edit/")):
                            tab.goto(url + path)
                            tab.screenshot(path=str(ARTIFACTS / f"selfhost-{name}-{width}-{lang}-{theme}.png"),
                                           full_page=True)
                        ctx.close()
            browser.close()
        assert RecallVector.objects.filter(model="openai:fake-embed+prev1").exists()
        assert picked == f"{Connection.objects.get().pk}|qwen2.5:7b-通义"
        # The server process hashes with Django's default PBKDF2 (the suite's MD5 came later).
        assert PBKDF2PasswordHasher().verify("b-longer-pw-4420", get_user_model().objects.get(username="lin").password)
