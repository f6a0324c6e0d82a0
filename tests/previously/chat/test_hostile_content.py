"""Message content with HTML, script and markdown tricks is inert everywhere it is shown:
streamed token frames, the final frame, the chat page after a reload (issue 9)."""

from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from tests.csp import assert_csp_clean, csp_violations
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)

ATTACKS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    "[click](javascript:alert(3))",
    '<a href="javascript:alert(4)">x</a>',
    '"><svg onload=alert(5)>',
    "<div hx-get=\"/data/export/\" hx-trigger=\"load\">",
    '<span id="messages" hx-swap-oob="innerHTML">wiped</span>',
]


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.seen = []

    def handle_starttag(self, tag, attrs):
        self.seen.append((tag, attrs))


async def test_hostile_text_from_user_and_model_is_inert_in_every_frame(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=[ATTACKS[0][:9], ATTACKS[0][9:], *ATTACKS[1:]]))
    chat = await connect(user)
    frames = await chat.say(" ".join(ATTACKS), mid=new_mid(1))
    for frame in frames:
        assert csp_violations(frame) == [], frame
        assert "<script" not in frame and "<svg" not in frame and "<img" not in frame
        # A finished reply is Markdown rendered and sanitised (U1): its text may hold a bare
        # quote, so what matters is the elements a browser builds, not the characters.
        elements = Elements()
        elements.feed(frame)
        attributes = [(name, value) for _, attrs in elements.seen for name, value in attrs]
        assert not any(name == "hx-trigger" or "/data/export/" in (value or "") for name, value in attributes)
        assert [tag for tag, attrs in elements.seen if ("id", "messages") in attrs and tag != "div"] == []
        assert ">wiped<" not in frame.replace("&gt;wiped&lt;", "")


def test_hostile_archived_lines_are_inert_on_the_chat_page(user, profile):
    from tests.factories import MessageFactory

    for n, attack in enumerate(ATTACKS):
        MessageFactory(profile=profile, mid=new_mid(100 + n), content=attack)
    client = Client()
    client.force_login(user)
    response = client.get(reverse("home"))
    assert_csp_clean(response)
    html = response.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<svg" not in html
