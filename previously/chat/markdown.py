"""Finished replies as Markdown (SPEC U1): markdown-it-py (CommonMark, raw HTML off, tables and
strikethrough on), then nh3 (ammonia) keeps only the tags below. The archive keeps the raw
text; this runs at display time only. User lines are never rendered (plain text).

Links get rel="noopener noreferrer" and open in a new tab; only http(s) and mailto survive
(markdown-it already refuses javascript:, vbscript: and data: links; nh3 checks again).
No inline style, no event handler, no script survives, so the strict CSP stays intact.
The code blocks' copy buttons are added by static/previously/chat.js.
"""

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}
ATTRIBUTES = {
    "a": {"href", "title", "target"},
    "ol": {"start"},
    "code": {"class"},  # language-xxx from a fence's info string
}
MAX_RENDER = 100_000  # characters; longer text is shown plain (rendering cost stays bounded)


def render_markdown(text: str) -> str:
    """Sanitised HTML for `text`; safe to mark safe in a template."""
    html = _md.render(text or "")
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )
