"""A blocked run in the inspector, in a real headless chromium: its reason, error, fixes and resolutions."""

from __future__ import annotations

import asyncio
import http.client
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from tests.ui import app
from tests.ui.harness import ROOT, Server, env, serve

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why, and fails under CI=true
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser

BLOCKED = ("cut-happened", "cut-not-happened", "cut-refused")


def seed_blocked(data_dir: Path) -> None:
    """Runs whose plain tool was cut mid-call, then recovered: each ends blocked (unknown_commit)."""

    async def cut(world: durable.World, run_id: str) -> None:
        app.CUT["armed"] = True
        try:
            await durable.run_workflow(app.charging, 5, world=world, run_id=run_id)
        except KeyboardInterrupt:
            pass
        finally:
            app.CUT["armed"] = False

    async def go() -> None:
        world = durable.local_world(data_dir)
        try:
            for rid in BLOCKED:
                await cut(world, rid)
            await durable.recover_runs(world, [app.charging])
            end = time.monotonic() + 30
            while any(durable.runtime.run_status(world, r).status != "blocked" for r in BLOCKED):
                assert time.monotonic() < end, "the recovered runs did not block"
                await asyncio.sleep(0.02)
        finally:
            world.close()

    asyncio.run(go())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose runs are blocked on an unknown commit (seeded in a subprocess)."""
    path = tmp_path_factory.mktemp("ui-blocked") / "data"
    code = "from pathlib import Path\nfrom tests.ui.test_inspector_blocked import seed_blocked\n"
    code += f"seed_blocked(Path({str(path)!r}))\n"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[Server]:
    """``little ui`` that knows the workflow, so it checks results and drives resolved runs."""
    with serve(data_dir, "--workflow", "tests.ui.app:charging") as s:
        yield s


def test_a_blocked_run_shows_its_reason_error_and_the_commands_that_unblock_it(
    page: Any, server: Server
) -> None:
    """The page of a blocked run names the reason, the unknown commit and the exact resolve commands."""
    page.goto(f"{server.base}/runs/cut-refused")
    expect(page.locator("#run-status .badge")).to_have_text("blocked")
    expect(page.locator(".run-blocked .reason")).to_have_text("unknown_commit")
    expect(page.locator(".run-blocked .message")).to_contain_text("tool 'charge_card'")
    fixes = page.locator(".run-blocked ul.fixes li")
    expect(fixes).to_have_count(3)
    expect(fixes.first).to_contain_text("little resolve cut-refused 'tool:charge_card#0' --happened")
    expect(page.locator("form.resolve")).to_have_count(2)


def test_resolving_as_happened_records_the_result_and_the_run_completes(page: Any, server: Server) -> None:
    """'It happened' with a result, confirmed, becomes the call's receipt; the decision is listed."""
    page.goto(f"{server.base}/runs/cut-happened")
    page.fill("form.resolve textarea", '"charged 5 (seen at the bank)"')
    page.click('button[data-action="resolve-happened"]')
    expect(page.locator("h1")).to_have_text("Confirm: resolve")
    page.click("#confirm")
    expect(page.locator(".flash")).to_contain_text("recorded that tool:charge_card#0 happened")
    expect(page.locator("#run-status .badge")).to_have_text("completed", timeout=30_000)
    expect(page.locator("#resolutions")).to_contain_text("happened")
    expect(page.locator("#resolutions")).to_contain_text("inspector")
    page.locator("details.raw summary").click()
    expect(page.locator("details.raw")).to_contain_text("paid: charged 5 (seen at the bank)")


def test_resolving_as_not_happened_calls_the_tool_again(page: Any, server: Server) -> None:
    """'It did not happen', confirmed, lets the tool run again; the run completes with its new result."""
    page.goto(f"{server.base}/runs/cut-not-happened")
    page.click('button[data-action="resolve-not-happened"]')
    page.click("#confirm")
    expect(page.locator("#run-status .badge")).to_have_text("completed", timeout=30_000)
    expect(page.locator("#resolutions")).to_contain_text("not_happened")
    page.locator("details.raw summary").click()
    expect(page.locator("details.raw")).to_contain_text("paid: charged 5")


def test_a_result_of_the_wrong_type_is_refused_and_the_run_stays_blocked(page: Any, server: Server) -> None:
    """A result the tool could not have returned is refused with the reason; nothing changes."""
    page.goto(f"{server.base}/runs/cut-refused")
    page.fill("form.resolve textarea", '{"not": "a string"}')
    page.click('button[data-action="resolve-happened"]')
    page.click("#confirm")
    expect(page.locator("h1")).to_have_text("resolve failed")
    expect(page.locator("main")).to_contain_text("not a valid result")
    page.goto(f"{server.base}/runs/cut-refused")
    expect(page.locator("#run-status .badge")).to_have_text("blocked")


def test_a_resolution_without_the_token_is_refused(server: Server) -> None:
    """A POST of a resolution without the inspector's token changes nothing."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        body = "id=cut-refused&key=tool%3Acharge_card%230&happened=0"
        conn.request("POST", "/action/resolve", body, {"Content-Type": "application/x-www-form-urlencoded"})
        resp = conn.getresponse()
        assert resp.status == 403
        assert b"needs the inspector&#x27;s token" in resp.read()
    finally:
        conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/runs/cut-refused?fragment=1")
        assert b"blocked" in conn.getresponse().read()
    finally:
        conn.close()
