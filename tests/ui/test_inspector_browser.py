"""The inspector in a real headless chromium: the list, a run, live updates, cancel, answer, the token."""

from __future__ import annotations

import http.client
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.ui.harness import HOSTILE, Server, listening_addresses, start_driver, wait_for_run

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why, and fails under CI=true
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser
pytest.importorskip("starlette")  # little ui needs the ui extra


def test_the_list_shows_every_run_with_its_status_and_escapes_hostile_ids(page: Any) -> None:
    """The run list names each seeded run with its status; a run id full of markup stays text."""
    assert page.url.endswith("/")  # the token moved into a cookie, out of the address bar
    rows = page.locator("table.runs tbody tr")
    expect(rows).to_have_count(6)
    expect(page.locator('tr[data-run-id="needs-answer"] .badge')).to_have_text("interrupted")
    expect(page.locator('tr[data-run-id="family"] .badge')).to_have_text("completed")
    hostile = page.locator("a.run-link", has_text="evil<img")
    expect(hostile).to_have_text(HOSTILE)
    assert page.locator("main img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_filters_and_search_narrow_the_list(page: Any) -> None:
    """Filtering by status and searching by text keep only the matching runs."""
    page.select_option('select[name="status"]', "failed")
    page.click('form.filters button[type="submit"]')
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    expect(page.locator("table.runs tbody tr .badge")).to_have_text("failed")
    page.goto(page.url.split("?")[0] + "?q=family")
    expect(page.locator("table.runs tbody tr")).to_have_count(2)  # the parent and its child


def test_a_run_page_shows_its_timeline_interrupt_and_child_links(page: Any) -> None:
    """A run page shows its executed step and the interrupt it waits at; a parent links its child."""
    page.click('a.run-link:text-is("needs-answer")')
    expect(page).to_have_url(re.compile(r"/runs/needs-answer$"))
    expect(page.locator("#run-status .badge")).to_have_text("interrupted")
    step = page.locator('tr.item[data-key="draft"]')
    expect(step).to_contain_text("executed")
    expect(page.locator("form.answer")).to_contain_text("publish?")
    page.goto(page.url.replace("/runs/needs-answer", "/runs/family"))
    child = page.locator("ul.children a")
    expect(child).to_have_count(1)
    child.click()
    expect(page.locator("#run-status .badge")).to_have_text("completed")
    expect(page.locator("dl.facts")).to_contain_text("parent")


def test_a_failed_runs_error_is_shown_as_text(page: Any, server: Server) -> None:
    """The failed run's page shows its recorded error message, markup and all, as text."""
    page.goto(f"{server.base}/runs/{quote(HOSTILE, safe='')}")
    expect(page.locator("#run-id")).to_have_text(HOSTILE)
    expect(page.locator(".run-error .message")).to_contain_text("<script>alert(1)</script>")
    expect(page.locator('tr.item[data-key="explode"] .errors')).to_contain_text("cannot handle 3")
    assert page.locator("main script").count() == 0


def test_a_running_runs_status_changes_on_the_page_without_a_reload(
    page: Any, server: Server, data_dir: Path
) -> None:
    """A run driven by another process shows running, then completed, on a page that never reloads."""
    driver = start_driver(data_dir, "ticks-to-end", 25)
    try:
        wait_for_run(data_dir, "ticks-to-end")
        page.goto(f"{server.base}/runs/ticks-to-end")
        expect(page.locator("#run-status .badge")).to_have_text("running")
        page.evaluate("window.__same_page = true")
        expect(page.locator("#run-status .badge")).to_have_text("completed", timeout=30_000)
        assert page.evaluate("window.__same_page") is True
        expect(page.locator("table.timeline")).to_contain_text("timer")
    finally:
        driver.wait(30)


def test_cancel_stops_a_running_run_after_a_confirmation(page: Any, server: Server, data_dir: Path) -> None:
    """Cancel asks first, then the other process's run stops and the page shows cancelled."""
    driver = start_driver(data_dir, "ticks-forever", 100_000)
    try:
        wait_for_run(data_dir, "ticks-forever")
        page.goto(f"{server.base}/runs/ticks-forever")
        expect(page.locator("#run-status .badge")).to_have_text("running", timeout=30_000)
        page.click('a.action[data-action="cancel"]')
        expect(page.locator("h1")).to_have_text("Confirm: cancel")
        page.click("#confirm")
        expect(page.locator(".flash")).to_contain_text("cancel requested")
        expect(page.locator("#run-status .badge")).to_have_text("cancelled", timeout=30_000)
        assert driver.wait(30) == 0
    finally:
        if driver.poll() is None:
            driver.kill()


def test_answering_an_interrupt_lets_the_run_finish(page: Any, server: Server) -> None:
    """An answer typed on the run page, confirmed, is recorded and the run goes on to completion."""
    page.goto(f"{server.base}/runs/needs-answer")
    page.fill("form.answer textarea", '"yes"')
    page.click('form.answer button[data-action="answer"]')
    expect(page.locator("h1")).to_have_text("Confirm: answer")
    page.click("#confirm")
    expect(page.locator(".flash")).to_contain_text("answer recorded")
    expect(page.locator("#run-status .badge")).to_have_text("completed", timeout=30_000)
    page.locator("details.raw summary").click()
    expect(page.locator("details.raw")).to_contain_text("published: a draft about cats")


def test_actions_without_the_token_are_refused(stranger: Any, server: Server) -> None:
    """A browser that never saw the token can read on loopback, but its confirmed action is refused."""
    stranger.goto(f"{server.base}/runs/family")
    expect(stranger.locator("#run-status .badge")).to_have_text("completed")
    stranger.goto(f"{server.base}/confirm/cancel?id=family")
    expect(stranger.locator(".warn")).to_contain_text("without the token")
    stranger.click("#confirm")
    expect(stranger.locator("h1")).to_have_text("refused")
    for body in ("id=family", "id=family&token=wrong"):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/action/cancel", body, {"Content-Type": "application/x-www-form-urlencoded"})
        assert conn.getresponse().status == 403
        conn.close()


def test_the_server_listens_on_loopback_only_by_default(server: Server) -> None:
    """Without --host, the only socket listening on the inspector's port is bound to 127.0.0.1."""
    assert listening_addresses(server.port) == ["127.0.0.1"]


def test_a_bad_port_is_one_line_on_stderr(data_dir: Path) -> None:
    """An impossible --port is refused with one line, before anything listens."""
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "durable.cli", "ui", "--data-dir", str(data_dir), "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == "little: --port must be between 0 and 65535"
