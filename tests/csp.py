"""CSP helpers for every page's tests (issue 9): no inline script, no on*= handlers, no
javascript: URLs, no inline styles, nothing htmx would have to eval.

Use from any test::

    from tests.csp import assert_csp_clean
    response = client.get(url)
    assert_csp_clean(response)          # a response: checks the header and the HTML
    assert_csp_clean(html_string)       # or any rendered partial / websocket frame

The failure message lists each violation with its tag and attribute, so a new page that
breaks the policy says where. `csp_violations(html)` returns the same list without asserting.
"""

from html.parser import HTMLParser

# <script type=…> values a browser executes; anything else (application/json, …) is a data block.
_JS_TYPES = {"", "text/javascript", "module", "application/javascript", "text/ecmascript"}
_URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "data", "poster", "srcdoc"}
# htmx attributes whose value htmx evaluates as JavaScript (blocked: allowEval is off).
_EVAL_PREFIXES = ("js:", "javascript:")


class _Auditor(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.violations: list[str] = []
        self._in_script: tuple[str, bool] | None = None  # (where, executable)
        self._script_text = ""

    def handle_starttag(self, tag, attrs):
        a = {k.lower(): (v or "") for k, v in attrs}
        where = f"<{tag}{' id=' + a['id'] if a.get('id') else ''}>"
        for name, value in a.items():
            if name.startswith("on"):
                self.violations.append(f"{where}: inline event handler {name}=")
            if name.startswith(("hx-on", "data-hx-on")):
                self.violations.append(f"{where}: {name}= needs eval (blocked by the CSP)")
            if name in {"hx-vals", "hx-vars", "data-hx-vals"} and value.strip().lower().startswith(_EVAL_PREFIXES):
                self.violations.append(f"{where}: {name}= with a js: expression needs eval")
            if name in {"hx-trigger", "data-hx-trigger"} and "[" in value:
                self.violations.append(f"{where}: {name}= event filter [..] needs eval")
            if name in _URL_ATTRS and "".join(value.split()).lower().startswith(("javascript:", "vbscript:")):
                self.violations.append(f"{where}: javascript: URL in {name}=")
            if name == "style":
                self.violations.append(f"{where}: inline style= attribute (style-src 'self')")
        if tag == "script":
            executable = a.get("type", "").strip().lower() in _JS_TYPES
            if executable and not a.get("src"):
                self._in_script = (where, True)
                self._script_text = ""
            else:
                self._in_script = (where, False)
        if tag == "style":
            self.violations.append(f"{where}: inline <style> block (move it to static CSS)")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "script":
            self.handle_endtag(tag)

    def handle_data(self, data):
        if self._in_script:
            self._script_text += data

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script:
            where, executable = self._in_script
            if executable:
                self.violations.append(f"{where}: inline script ({self._script_text.strip()[:60]!r})")
            self._in_script = None


def csp_violations(html: str) -> list[str]:
    """What in this HTML a strict CSP (script-src 'self' + nonce, style-src 'self') would block."""
    auditor = _Auditor()
    auditor.feed(html)
    auditor.close()
    return auditor.violations


def assert_csp_clean(page) -> None:
    """Assert a response (or HTML string) would run unchanged under the site's CSP."""
    if isinstance(page, str):
        html = page
    else:
        content_type = page.get("Content-Type", "")
        if page.status_code == 200 and content_type.startswith("text/html"):
            policy = page.get("Content-Security-Policy", "")
            assert "script-src" in policy and "'unsafe-inline'" not in policy, (
                f"missing or weak Content-Security-Policy header: {policy!r}"
            )
        if not content_type.startswith("text/html"):
            return
        html = page.content.decode(page.charset or "utf-8")
    found = csp_violations(html)
    assert not found, "CSP violations:\n  " + "\n  ".join(found)
