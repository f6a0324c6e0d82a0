"""Finished replies render Markdown (SPEC U1): a maintained renderer (markdown-it-py, raw HTML
off) and sanitiser (nh3); user lines stay plain; the archive keeps the raw text."""

from html.parser import HTMLParser

import pytest

from memory.models import Message
from previously.chat import turn
from previously.chat.markdown import render_markdown
from tests.factories import MessageFactory, ProfileFactory
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid


class Tags(HTMLParser):
    """The elements and attributes a browser would build from the HTML (not its text)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def handle_starttag(self, tag, attrs):
        self.seen.append((tag, attrs))


def test_headings_lists_emphasis_tables_and_code():
    html = render_markdown(
        "# 标题 Title\n\n- one *em* **strong** ~~gone~~\n- 二 🙂\n\n1. first\n2. second\n\n"
        "| a | b |\n|---|:-:|\n| 1 | 2 |\n\n```python\nprint('<hi>')\n```\n\n> quoted `code`"
    )
    assert "<h1>标题 Title</h1>" in html
    assert "<li>one <em>em</em> <strong>strong</strong> <s>gone</s></li>" in html
    assert "<ol>" in html and "<li>二 🙂</li>" in html
    assert "<table>" in html and "<th>a</th>" in html and '<td>2</td>' in html and 'style' not in html  # alignment is an inline style: dropped (CSP)
    assert '<pre><code class="language-python">print(\'&lt;hi&gt;\')\n</code></pre>' in html
    assert "<blockquote>" in html and "<code>code</code>" in html


def test_links_get_noopener_noreferrer_and_javascript_links_are_refused():
    html = render_markdown("[site](https://example.com/a?b=1&c=2) [bad](javascript:alert(1)) [mail](mailto:a@b.c) [d](data:text/html,x)")
    assert 'href="/chat/leave/?to=https%3A%2F%2Fexample.com%2Fa%3Fb%3D1%26c%3D2"' in html  # the click-through
    assert 'rel="noopener noreferrer"' in html and 'target="_blank"' in html
    assert "href=\"javascript" not in html and "href=\"data" not in html  # left as plain text
    assert "[bad](javascript:alert(1))" in html
    assert 'href="mailto:a@b.c"' in html


@pytest.mark.parametrize("hostile", [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    '<a href="javascript:alert(3)">x</a>',
    "<style>body{display:none}</style>",
    '<p style="color:red" onclick="x()">styled</p>',
    "[x](  JaVaScRiPt:alert(4))",
    "![pic](https://tracker.example/p.png)",
    "<iframe src=https://evil.example></iframe>",
])
def test_raw_html_and_hostile_markup_never_reach_the_page(hostile):
    tags = Tags()
    tags.feed(render_markdown(hostile))
    assert not {"script", "img", "style", "iframe"} & {tag for tag, _ in tags.seen}, tags.seen
    for _, attrs in tags.seen:
        for name, value in attrs:
            assert name not in {"src", "style", "onerror", "onclick"}, tags.seen
            assert not (value or "").strip().lower().startswith(("javascript", "data")), tags.seen


@pytest.mark.django_db
def test_a_finished_reply_renders_and_a_user_line_stays_plain():
    profile = ProfileFactory(language="en")
    raw = "**bold** and [link](https://example.com)\n\n```\ncode <b>\n```"
    reply = MessageFactory(profile=profile, speaker="assistant", mid="a_1700000000000_abcdef01", content=raw)
    user = MessageFactory(profile=profile, speaker="user", mid=new_mid(1), content="**not bold** <b>x</b>", slice=reply.slice)
    shown_reply = turn.render_message(reply, lang="en")
    shown_user = turn.render_message(user, lang="en")
    assert '<div class="content md"><p><strong>bold</strong>' in shown_reply
    assert "<pre><code>code &lt;b&gt;\n</code></pre>" in shown_reply
    assert '<div class="content">**not bold** &lt;b&gt;x&lt;/b&gt;</div>' in shown_user
    assert Message.objects.get(pk=reply.pk).content == raw  # the archive keeps the raw Markdown


@pytest.mark.django_db(transaction=True)
async def test_the_reply_streams_as_plain_text_and_ends_rendered(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["# Hi", "\n\n- a", "\n- b *c*"]))
    chat = await connect(user)
    frames = await chat.say("list please", mid=new_mid(1))
    tokens = [f for f in frames if f.startswith('<span id="reply-')]
    assert "<h1>" not in "".join(tokens) and "# Hi" in "".join(tokens)  # plain while streaming
    assert "<h1>Hi</h1>" in frames[-1] and "<li>b <em>c</em></li>" in frames[-1]
    stored = await Message.objects.filter(speaker="assistant").aget()
    assert stored.content == "# Hi\n\n- a\n- b *c*"
