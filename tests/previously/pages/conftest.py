import re

import pytest

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"\son[a-z]+=", re.IGNORECASE)


def assert_no_inline_script(html: str) -> None:
    """issue 9's CSP: no inline <script> and no on*= handler attributes in any page."""
    assert not INLINE_SCRIPT.search(html), INLINE_SCRIPT.search(html).group(0)
    assert not INLINE_HANDLER.search(html), html[INLINE_HANDLER.search(html).start() - 80 :][:160]


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def _offline_provider():
    """The pages read get_provider(); never probe a local Ollama from a test."""
    from previously.llm import reset_provider
    from previously.llm.offline import Offline

    reset_provider(Offline())
    yield
    reset_provider(None)
