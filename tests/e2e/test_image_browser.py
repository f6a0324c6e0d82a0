"""An image message in a real browser (SPEC A7): attach with the button, see the thumbnail
(served by the owner-only view), get the reply, and the model received the image part.
Same set-up as test_chat_browser.py (Daphne forked in setUpClass)."""

import io
import tempfile
from pathlib import Path

import pytest
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections
from django.test.utils import override_settings
from PIL import Image

from memory.models import Message
from previously.llm import reset_provider
from previously.llm.openai_compat import OpenAICompatible
from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path
from tests.e2e.live import LiveChatServer, log_in
from tests.llm_server import FakeLLMServer, Turn


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class ImageInTheBrowser(ChannelsLiveServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = FakeLLMServer().start()
        reset_provider(OpenAICompatible(base_url=cls.llm.base_url, api_key="", model="fake-model"))
        cls.media = tempfile.TemporaryDirectory()
        cls._media = override_settings(MEDIA_ROOT=cls.media.name)
        cls._media.enable()  # before the fork, so the server stores uploads there
        test = settings.DATABASES["default"].setdefault("TEST", {})
        cls._test_name = test.get("NAME")
        test["NAME"] = connections["default"].settings_dict["NAME"]
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        settings.DATABASES["default"]["TEST"]["NAME"] = cls._test_name
        cls._media.disable()
        cls.media.cleanup()
        reset_provider(None)
        cls.llm.stop()

    def test_attach_an_image_see_its_thumbnail_and_the_reply(self):
        from playwright.sync_api import expect, sync_playwright

        get_user_model().objects.create(
            username="ana", password=PBKDF2PasswordHasher().encode("pw-ana-12345", "e2esalt", iterations=1000)
        )
        picture = Path(self.media.name) / "upload-me.png"
        out = io.BytesIO()
        Image.new("RGB", (64, 48), (20, 160, 90)).save(out, "PNG")
        picture.write_bytes(out.getvalue())
        self.llm.script(Turn(chunks=["What a ", "green square."]))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 390, "height": 800})
            log_in(page, self.live_server_url, "ana", "pw-ana-12345")
            page.wait_for_function("() => window.htmx && document.querySelector('[ws-connect]')")
            page.wait_for_timeout(300)  # let the socket open
            page.fill("#composer-text", "my new desk plant")
            page.set_input_files("#image-input", str(picture))
            expect(page.locator(".msg.assistant:not(.streaming) .content")).to_have_text("What a green square.", timeout=10_000)
            thumb = page.locator(".msg.user.image img.thumb")
            expect(thumb).to_have_count(1)
            page.wait_for_function("() => document.querySelector('img.thumb').naturalWidth > 0")
            expect(page.locator(".msg.user.image .content")).to_have_text("my new desk plant")
            assert page.locator("#composer-text").input_value() == ""
            page.reload()
            page.wait_for_selector("img.thumb")
            page.wait_for_function("() => document.querySelector('img.thumb').naturalWidth > 0")
            browser.close()

        rows = list(Message.objects.order_by("created_at").values_list("speaker", "message_type", "content"))
        assert rows == [("user", "image", "my new desk plant"), ("assistant", "text", "What a green square.")]
        parts = self.llm.requests[0]["messages"][-1]["content"]
        assert parts[0] == {"type": "text", "text": "my new desk plant"}
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
class TooLargeImageInTheBrowser(LiveChatServer):
    """One journey per class: the forked server keeps its own connection to the test database."""

    def test_a_too_large_image_is_refused_in_the_browsers_language(self):
        """chat.js takes its sentence from the page (data-too-large, translated by Django)."""
        from playwright.sync_api import expect, sync_playwright

        self.make_user("bo", "pw-bo-123456")
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        big = Path(folder.name) / "big.png"
        big.write_bytes(b"\x89PNG" + bytes(3 * 1048576))  # refused by size in the page, never sent
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(locale="zh-CN")
            log_in(page, self.live_server_url, "bo", "pw-bo-123456")
            page.evaluate("() => { document.getElementById('image-form').dataset.maxBytes = String(2 * 1048576); }")
            page.set_input_files("#image-input", str(big))
            expect(page.locator("#notices .notice.error")).to_have_text("图片太大（上限 2 MB）")
            browser.close()
        assert not Message.objects.exists()
