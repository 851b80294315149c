"""A page of another origin in the same browser: it cannot frame the inspector nor post its actions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.ui.harness import Server

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why, and fails under CI=true
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser
pytest.importorskip("starlette")  # little ui needs the ui extra

VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", e => window.__violations.push(e.violatedDirective));
"""
"""Collects what the page's content security policy blocked, from before the page's first script."""


@pytest.fixture(scope="module")
def other_site(server: Server) -> Iterator[str]:
    """A second web server on another port of 127.0.0.1 (the same site for cookies, another origin)."""
    target = server.base
    pages = {
        "/frame": f'<iframe id="inspector" src="{target}/confirm/cancel?id=needs-answer" width="900" '
        'height="500"></iframe>',
        "/form": f'<form method="post" action="{target}/action/cancel">'
        '<input name="id" value="needs-answer"><input name="token" value="{token}">'
        '<button id="go">win a prize</button></form>',
        "/blank": "<p>another site</p>",
    }

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path.split("?")[0], "").replace("{token}", server.token).encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def _status(page: Any, server: Server, run_id: str) -> str:
    page.goto(f"{server.base}/runs/{run_id}")
    text: str = page.locator("#run-status .badge").inner_text()
    return text


def test_a_page_of_another_port_cannot_frame_the_confirmation(
    page: Any, server: Server, other_site: str
) -> None:
    """The browser holds the token's cookie, yet the framed confirm page never renders: nothing to click."""
    page.goto(f"{other_site}/frame")  # waits for the load event, which waits for the frame
    framed = page.frame_locator("#inspector")
    assert framed.locator("#confirm").count() == 0
    assert framed.locator('input[name="token"]').count() == 0
    assert all(server.token not in f.content() for f in page.frames if not f.url.startswith("chrome-error:"))
    assert _status(page, server, "needs-answer") == "interrupted"


def test_a_form_of_another_origin_posting_the_token_is_refused(
    page: Any, server: Server, other_site: str
) -> None:
    """A form on another port that posts the right token gets a one-line refusal; nothing changes."""
    page.goto(f"{other_site}/form")
    page.click("#go")
    expect(page.locator("h1")).to_have_text("refused")
    expect(page.locator(".message")).to_contain_text("posted from another site (Sec-Fetch-Site: same-site)")
    assert _status(page, server, "needs-answer") == "interrupted"


def test_a_fetch_of_another_origin_posting_the_token_is_refused(
    page: Any, server: Server, other_site: str
) -> None:
    """A script on another port that posts the right token with the browser's cookies changes nothing."""
    page.goto(f"{other_site}/blank")
    sent = page.evaluate(
        """async ([url, token]) => {
            await fetch(url, {method: "POST", mode: "no-cors", credentials: "include",
                headers: {"Content-Type": "application/x-www-form-urlencoded"},
                body: "id=needs-answer&token=" + token});
            return true;
        }""",
        [f"{server.base}/action/cancel", server.token],
    )
    assert sent is True
    assert _status(page, server, "needs-answer") == "interrupted"


def test_the_inspector_s_own_pages_break_none_of_its_policy_and_its_buttons_act(
    page: Any, server: Server
) -> None:
    """Pages with the tree, the bars and the live script report no blocked content; the own button cancels."""
    page.add_init_script(VIOLATIONS)
    for path in ("/", "/runs/support-small", "/compare?a=support-small&b=support-big", "/runtime"):
        page.goto(server.base + path)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__violations") == [], path
    page.goto(f"{server.base}/confirm/cancel?id=needs-answer")
    page.click("#confirm")
    expect(page.locator(".flash")).to_contain_text("cancel requested")
    expect(page.locator("#run-status .badge")).to_have_text("cancelled", timeout=30_000)
    assert page.evaluate("window.__violations") == []
