"""The dashboard in a real headless browser: Debian's ``chromium`` driven by
Playwright for Python, launched by its executable path (Playwright's own
browser download cannot run here; ``make browser-deps`` installs chromium).

Without chromium or Playwright these tests skip — except under ``CI=true``,
where that is a failure: CI must run them (as tests/e2e does for its binaries).
Every test that uses the browser is marked ``browser``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CI = os.environ.get("CI", "").lower() == "true"
HERE = Path(__file__).parent

#: Chromium in a closed network: no background connections (which this
#: network refuses, stalling start-up), no sandbox (root in a container), no GPU.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


def unavailable(reason: str) -> NoReturn:
    if CI:
        pytest.fail(f"{reason} (CI=true: the browser tests must run; `make browser-deps` installs chromium)")
    pytest.skip(reason)


def chromium_path() -> str | None:
    """$BERTH_CHROMIUM, else Debian's /usr/bin/chromium, else a chromium on PATH."""
    for candidate in (os.environ.get("BERTH_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for one test module: Playwright's sync API runs an event loop
    of its own, which should not outlive the module into asyncio tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright for Python is not installed (pip install -e '.[dev]')")
    path = chromium_path()
    if path is None:
        unavailable("no chromium found (/usr/bin/chromium; `make browser-deps` installs Debian's)")
    with sync_playwright() as p:
        # A fresh profile each run (launch() makes one in a temporary folder).
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page_errors() -> list[str]:
    """Script errors and console errors (failed requests) of ``page``; a test
    expecting some (a 404 it asked for) clears them."""
    return []


#: Reported to the console by the page itself (an init script, which the
#: policy does not govern) for every ``securitypolicyviolation`` event.
_CSP_REPORTER = """
document.addEventListener("securitypolicyviolation", (e) =>
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`));
"""


@pytest.fixture
def page(browser: Browser, page_errors: list[str]) -> Iterator[Page]:
    """A page in a fresh browser context (no cache, no storage), 1400x1000.
    Any Content-Security-Policy violation fails the test, whatever it
    expected otherwise (those are kept apart from ``page_errors``)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(_CSP_REPORTER)
    pg = context.new_page()
    csp: list[str] = []

    def console(m: Any) -> None:
        if "Content Security Policy" in m.text or m.text.startswith("CSP violation"):
            csp.append(m.text)
        elif m.type == "error":
            page_errors.append(m.text)

    pg.on("pageerror", lambda e: page_errors.append(str(e)))
    pg.on("console", console)
    pg.set_default_timeout(15_000)
    try:
        yield pg
    finally:
        context.close()
    assert not csp, csp
    assert not page_errors, page_errors


def wait_for(page: Page, expression: str, arg: Any = None, *, timeout: float = 15.0) -> None:
    """Until ``expression`` (or the function, called with ``arg``) is truthy
    in the page. Playwright's ``wait_for_function`` compiles its predicate
    with ``eval`` in the page, which the dashboard's policy (script-src
    'self', no 'unsafe-eval') refuses; ``evaluate`` goes through the
    DevTools protocol, which no page policy governs."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout:g}s: {expression}")
        time.sleep(0.05)


def shot(page: Page, path: Path, **kw: Any) -> Path:
    """A full-page screenshot (to look at while developing: the test's tmp_path)."""
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header where it belongs
    page.screenshot(path=str(path), full_page=True, **kw)
    return path
