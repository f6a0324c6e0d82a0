"""Browser tests (@pytest.mark.browser) drive Debian's Chromium through Playwright.

They run in Debian's `chromium-headless-shell` (Chromium's old headless shell, what Playwright
itself runs headless tests in) when it is installed, else in `chromium`. The shell draws the same
pages with Blink as the full browser at about a third of its CPU: ten pages at 1280 and 390 px
took 0.97-1.05 s of CPU against 2.83-3.15 s (issue 25 point 4). Without a browser they are
skipped with a loud reason, except under CI=true, where a missing browser fails the run.
"""

import os
import shutil

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MISSING = (
    "BROWSER TESTS SKIPPED: no Chromium found (chromium-headless-shell or chromium on PATH). "
    "Install it with `apt-get install -y chromium-headless-shell` to run them."
)


def chromium_path() -> str | None:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    return None


def pytest_collection_modifyitems(config, items):
    browser_items = [item for item in items if item.get_closest_marker("browser")]
    if not browser_items or chromium_path():
        return
    if os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError(f"CI=true and {len(browser_items)} browser test(s) cannot run: {MISSING}")
    for item in browser_items:
        item.add_marker(pytest.mark.skip(reason=MISSING))
    config._previously_browser_missing = len(browser_items)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    missing = getattr(config, "_previously_browser_missing", 0)
    if missing:
        terminalreporter.write_sep("!", f"{missing} {MISSING}", red=True, bold=True)
