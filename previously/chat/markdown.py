"""Finished replies as Markdown (SPEC U1): markdown-it-py (CommonMark, raw HTML off, tables and
strikethrough on), then nh3 (ammonia) keeps only the tags below. The archive keeps the raw
text; this runs at display time only. User lines are never rendered (plain text).

Links get rel="noopener noreferrer" and open in a new tab; only http(s) and mailto survive
(markdown-it already refuses javascript:, vbscript: and data: links; nh3 checks again). A link
to another host (issue 24 point 9) shows that host beside its words and leads first to a
click-through page showing the whole address, so a link's words cannot pass for another one. No inline style, no event handler, no script survives, so the strict
CSP stays intact. The code blocks' copy buttons are added by static/previously/chat.js.

Cost (issue 24 point 4, S6): markdown-it is pure Python and some inputs are slow (99,000 "["
took 1.5-3.4 s), so a reply longer than PREVIOUSLY_MARKDOWN_MAX_CHARS is shown as escaped plain
text with a note, the rendered HTML of each text is cached (bounded in bytes: lines do not
change, so a line is rendered once per process), and the chat socket renders in a thread
(`warm`) before a frame is built, never on the event loop. A text of PROCESS_CHARS or more is
rendered in a helper process (one, `previously.chat.render_worker`, started on first use and
asked one text at a time): in a thread its pure-Python parse
kept the GIL from every other request (6 replies of 9,990 "![", 0.37 s each, took another
person's login page from 8 ms to a median of 20-30 ms and a maximum of 150-300 ms).
"""

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import threading
from urllib.parse import urlencode, urlsplit

import nh3
from django.conf import settings
from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext
from markdown_it import MarkdownIt

from previously.chat.lru import ByteLRU

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
}
ATTRIBUTES = {
    "a": {"href", "title", "target"},
    "ol": {"start"},
    "code": {"class"},  # language-xxx from a fence's info string
    "span": {"class"},  # link-host, added below after markdown-it (a reply cannot write it: html is off)
}
CACHE_BYTES = 16 * 1024 * 1024  # rendered HTML kept per process
_cache = ByteLRU(CACHE_BYTES)
# Texts this long or longer render in the helper process: a typical reply (under 2,000
# characters) renders in about a millisecond, where starting a process and handing it the
# text would cost more than it saves.
PROCESS_CHARS = 2000
_renderer: dict[str, subprocess.Popen] = {}  # "process": previously.chat.render_worker
_renderer_lock = threading.Lock()
# A forked process (a test's live server) starts a helper of its own: two processes asking one
# helper over the same pipes would read each other's answers.
os.register_at_fork(after_in_child=_renderer.clear)


def _link_open(self, tokens, idx, options, env):
    """A link to another host leads to the click-through page (`leave_url`), which shows the
    whole address before anyone goes there; the host is also shown after the link's words."""
    token = tokens[idx]
    href = token.attrGet("href")
    host = link_host(href)
    if host:
        token.meta["host"] = host
        token.attrSet("href", f"{env['leave']}?{urlencode({'to': str(href)})}")
    return self.renderToken(tokens, idx, options, env)


def _link_close(self, tokens, idx, options, env):
    level = tokens[idx].level
    opener = next((t for t in reversed(tokens[:idx]) if t.type == "link_open" and t.level == level), None)
    host = opener.meta.get("host", "") if opener is not None else ""
    html = self.renderToken(tokens, idx, options, env)
    return html + (f' <span class="link-host">({conditional_escape(host)})</span>' if host else "")


_md.add_render_rule("link_open", _link_open)
_md.add_render_rule("link_close", _link_close)


def link_host(href) -> str:
    """The host an http(s) link leads to ("" for mailto:, relative or unreadable ones); the
    click-through page reads its `to` with it too."""
    try:
        parts = urlsplit(str(href or ""))
    except ValueError:
        return ""
    return parts.hostname or "" if parts.scheme in ("http", "https") else ""


def render_markdown(text: str) -> str:
    """Sanitised HTML for `text`; safe to mark safe in a template. Uncached and unbounded: call
    `display_html`. A long text renders in the helper process, this thread waiting without the
    GIL; should that process have died, the text renders here and a new one starts next time."""
    text = text or ""
    # The click-through page for a link out of the site (previously/pages/chat/views.leave).
    leave = reverse("chat_leave")
    html = _ask_helper(text, leave) if len(text) >= PROCESS_CHARS else None
    return sanitised_html(text, leave) if html is None else html


def _ask_helper(text: str, leave: str) -> str | None:
    """The helper process's HTML for `text`, started if need be; None when it could not render
    it (an error this process then meets itself) or has died."""
    with _renderer_lock:
        helper = _renderer.get("process")
        try:
            if helper is None or helper.poll() is not None:
                helper = _renderer["process"] = subprocess.Popen(
                    [sys.executable, "-m", "previously.chat.render_worker"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="ascii",
                )
            helper.stdin.write(json.dumps({"text": text, "leave": leave}) + "\n")
            helper.stdin.flush()
            answer = helper.stdout.readline()
            if answer:
                return json.loads(answer)["html"]
        except (OSError, ValueError):
            pass
        _renderer.pop("process", None)
        return None


def sanitised_html(text: str, leave: str) -> str:
    """`text` as sanitised HTML; links out of the site lead to `leave` (runs in either process)."""
    html = _md.render(text, {"leave": leave})
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def max_chars() -> int:
    return settings.PREVIOUSLY_MARKDOWN_MAX_CHARS


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def display_html(text: str, *, cache: bool = True) -> SafeString:
    """A reply as the page shows it: its Markdown rendered (cached unless `cache=False`: an
    off-the-record line, P5, is kept nowhere), or, over PREVIOUSLY_MARKDOWN_MAX_CHARS, its text
    escaped and kept as written, with a note."""
    text = text or ""
    if len(text) > max_chars():
        note = gettext(
            "Shown as plain text: this reply is %(length)d characters long, and replies over %(limit)d "
            "(PREVIOUSLY_MARKDOWN_MAX_CHARS) are not formatted."
        ) % {"length": len(text), "limit": max_chars()}
        return format_html('<p class="md-note">{}</p><div class="md-plain">{}</div>', note, text)
    if not cache:
        return mark_safe(render_markdown(text))  # noqa: S308 - nh3 output: only the allow-listed tags
    key = _key(text)
    html = _cache.get(key)
    if html is None:
        html = render_markdown(text)
        _cache.put(key, html)
    return mark_safe(html)  # noqa: S308 - nh3 output: only the allow-listed tags


def _warm(texts: list[str]) -> None:
    for text in texts:
        if len(text or "") <= max_chars():
            display_html(text)


async def warm(texts) -> None:
    """Render `texts` into the cache in a worker thread, so that building a frame from them on
    the event loop finds them rendered (the chat socket calls this before each such frame)."""
    texts = [t for t in texts if t and len(t) <= max_chars() and _cache.get(_key(t)) is None]
    if texts:
        await asyncio.to_thread(_warm, texts)
