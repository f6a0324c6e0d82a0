"""The live-server set-up every browser journey shares: Daphne in a child process (Channels'
ChannelsLiveServerTestCase) talking to a local OpenAI-compatible server."""

import os
import tempfile
from pathlib import Path

from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.template.loader import get_template
from django.test.utils import override_settings
from django.urls import get_resolver
from playwright.sync_api import Locator

from memory.recall import embedding
from previously.housekeeping import WARM_TEMPLATES
from previously.llm import reset_provider
from previously.llm.openai_compat import OpenAICompatible
from tests.hashers import QuickPBKDF2
from tests.llm_server import FakeLLMServer, Turn

# The screenshots a person looks at (issue 17 points 8 and 9, issue 28): every page at these
# widths, in both interface languages (name, browser locale) and both themes, saved here.
ARTIFACTS = Path(settings.BASE_DIR) / "var" / "test-artifacts"
WIDTHS = (1280, 390)
LANGS = (("en", "en-GB"), ("zh", "zh-CN"))
THEMES = ("light", "dark")
# No assertion reads a screenshot, and taking them was about 30 % of a browser test's time
# (issue 25 point 4), so the suite takes them only when asked: `make shots` sets this.
SHOTS = os.environ.get("PREVIOUSLY_TEST_SHOTS") == "1"


def looks() -> list[tuple[str, str, str, int]]:
    """The looks (theme, language, browser locale, width) a test checks its pages in: all eight
    when the screenshots are asked for (`make shots`); else four that hold every pair of the
    three (each width in each language, each theme at each width and in each language). What the
    pages are checked for (nothing wider than the window, the bar on one row, the theme's
    background, the words of the language) turns on one or two of the three, and a page's look
    costs a second or more in the browser (issue 25 point 4)."""
    every = [(theme, lang, locale, width) for theme in THEMES for lang, locale in LANGS for width in WIDTHS]
    if SHOTS:
        return every
    return [look for look in every if (look[0] == "dark") == ((look[1] == "zh") != (look[3] == WIDTHS[1]))]


def shot(target, name: str, **options) -> None:
    """Save a screenshot of `target` (a page or a locator) as ARTIFACTS/<name>.png when shots are
    asked for. A locator is waited for either way, so a test that shoots an element still
    fails when the element never shows."""
    if isinstance(target, Locator):
        target.wait_for()
    if SHOTS:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(ARTIFACTS / f"{name}.png"), **options)


def log_in(page, base_url: str, username: str, password: str, *, submit: str = "button[type=submit]") -> None:
    """Sign in through the login page and wait for the chat composer it lands on."""
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click(submit)
    page.wait_for_selector("#composer-text")
    # The composer is parsed before chat.js at the page's end has run: on a loaded machine a
    # file chosen at once would go unheard.
    page.wait_for_load_state("load")


class LiveChatServer(ChannelsLiveServerTestCase):
    """Subclasses may set `default_turn`: what the fake model answers when nothing is scripted;
    and `connected = False` to start the server with no provider installed (offline until a
    connection is chosen in the browser, O4)."""

    default_turn: Turn | None = None
    connected = True
    # The composer's keystrokes hold background model calls back (previously.llm.gate); the
    # journeys script the model's answers in order, so a held turn analyzer would take the
    # next journey's scripted reply. The hold has tests of its own (test_gate, realmodel).
    typing_hold = 0

    @classmethod
    def setUpClass(cls):
        cls.llm = FakeLLMServer(default=cls.default_turn).start()
        # The child is forked in super().setUpClass(), so it keeps the provider installed here.
        reset_provider(OpenAICompatible(base_url=cls.llm.base_url, api_key="", model="fake-model")
                       if cls.connected else None)
        # Channels points the server at TEST["NAME"] or "test_" + NAME; on PostgreSQL NAME is
        # already the test database by now (-> "test_test_…"), so name it explicitly.
        test = settings.DATABASES["default"].setdefault("TEST", {})
        cls._test_name = test.get("NAME")
        test["NAME"] = connections["default"].settings_dict["NAME"]
        cls._typing_hold = settings.PREVIOUSLY_TYPING_HOLD_SECONDS
        settings.PREVIOUSLY_TYPING_HOLD_SECONDS = cls.typing_hold
        # A loaded CI machine (two test workers, each with a browser) answered the fake model
        # server's list in over 3 s once; the settings page then shows a text box instead.
        cls._list_wait = settings.PREVIOUSLY_MODEL_LIST_SECONDS
        settings.PREVIOUSLY_MODEL_LIST_SECONDS = 20
        # SQLite's rule: no open connection is carried across a fork. The server child would
        # inherit this thread's (its event-loop thread runs as this one did), and two processes
        # on one connection's locks and snapshot is how a test read none of the rows the server
        # had just shown (test_chat_browser, once, in a full run). Both sides open their own.
        cls.warm_before_the_fork()
        connections.close_all()
        # The child is forked before the suite's MD5 setting applies (tests/hashers.py).
        cls._hashers = override_settings(PASSWORD_HASHERS=["tests.hashers.QuickPBKDF2"])
        cls._hashers.enable()
        super().setUpClass()

    @staticmethod
    def warm_before_the_fork() -> None:
        """Load here once what each forked server would load for itself on its first requests
        (as previously.server's warm_up does before it listens): the sentence-embedding model,
        the URL patterns with every view they import, and the chat's templates. Each server
        inherits them; loading them cost each of them about 1.5 s of CPU (issue 25 point 4).
        The embedding choice is read afresh after (each test's database has its own)."""
        embedding.preload()
        embedding.forget_remote()
        get_resolver().url_patterns  # noqa: B018 - imported for the fork to inherit
        for name in WARM_TEMPLATES:
            get_template(name)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls._hashers.disable()
        settings.DATABASES["default"]["TEST"]["NAME"] = cls._test_name
        settings.PREVIOUSLY_TYPING_HOLD_SECONDS = cls._typing_hold
        settings.PREVIOUSLY_MODEL_LIST_SECONDS = cls._list_wait
        reset_provider(None)
        cls.llm.stop()

    @staticmethod
    def make_user(username: str, password: str):
        """A person the server can sign in (its hashers are QuickPBKDF2, the test's MD5)."""
        return get_user_model().objects.create(username=username, password=QuickPBKDF2().encode(password, "e2esalt"))


class LiveServerWithMedia(LiveChatServer):
    """A live server whose uploads go to a media folder of its own, `cls.media` (a temporary
    directory), set before the fork so the server keeps them there and the test reads them."""

    @classmethod
    def setUpClass(cls):
        cls.media = tempfile.TemporaryDirectory()
        cls._media = override_settings(MEDIA_ROOT=cls.media.name)
        cls._media.enable()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls._media.disable()
        cls.media.cleanup()
