"""Signing in to the dashboard in headless Chromium: ``berth serve`` with
``ui.auth.tokenFile`` shows the sign-in form (no inline script: the page's
policy holds, which the ``page`` fixture checks), refuses a wrong token in
words, draws the cluster once the right one is given, keeps the session in
an HttpOnly SameSite=Strict cookie the page's script cannot read, and signs
out on the server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import ROOT, demo_berth_serve, free_port
from tests.ui.conftest import shot

if TYPE_CHECKING:
    from playwright.sync_api import Page

TOKEN = "dashboard-token-for-the-browser-test"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("signin")
    (tmp / "token").write_text(TOKEN + "\n")
    cfg = tmp / "berth.yaml"
    cfg.write_text((ROOT / "examples/berth.yaml").read_text() + f"ui:\n  auth:\n    tokenFile: {tmp / 'token'}\n")
    ui = free_port()
    with demo_berth_serve("--config", str(cfg), "--ui-port", str(ui)):
        yield f"http://127.0.0.1:{ui}/ui/"


def status_of(url: str, cookie: str = "") -> int:
    req = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_page_asks_for_a_token_then_shows_the_cluster_and_signs_out(
    url: str, page: Page, page_errors: list[str], tmp_path: Path
) -> None:
    page.goto(url)
    page.wait_for_selector("html[data-signin] #signin-form")
    assert page.locator("#overview").is_hidden()
    shot(page, tmp_path / "signin.png")

    page.fill("#signin-token", "not-the-token")
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:text('ui.auth.tokenFile')")
    assert page.locator("#signin-token").input_value() == ""  # the token does not linger in the page

    page.fill("#signin-token", TOKEN)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector('html[data-nodes-drawn="50"][data-queues-ready][data-pods-ready]')
    page.wait_for_selector("#live.on")
    assert page.locator("#who").inner_text() == "signed in as berth:dashboard-token"
    (cookie,) = page.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (
        "berth_session",
        True,
        "Strict",
        "/ui/",
    )
    assert TOKEN not in cookie["value"]
    assert page.evaluate("document.cookie") == ""  # no script can read the session
    api = url + "api/whoami"
    assert status_of(api, f"berth_session={cookie['value']}") == 200
    shot(page, tmp_path / "signed-in.png")

    page.click("#signout")
    page.wait_for_selector("html[data-signin] #signin-form")
    assert status_of(api, f"berth_session={cookie['value']}") == 401  # ended on the server too
    assert json.loads(page.evaluate("fetch('api/whoami').then((r) => r.text())"))["Error"].startswith("GET ")
    page_errors.clear()  # the browser logs the 401s the page was answered before signing in
