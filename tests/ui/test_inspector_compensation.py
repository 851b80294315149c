"""A run's compensations on its inspector page, in headless chromium: each undo, its state and outcome."""

from __future__ import annotations

import asyncio
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


def seed_saga(data_dir: Path) -> None:
    """A saga whose refund is confirmed and whose seat release fails twice (blocked); a plain failed run."""

    async def go() -> None:
        world = durable.local_world(data_dir)
        try:
            h = await durable.start_workflow(app.ticket_saga, "o1", world=world, run_id="saga")
            end = time.monotonic() + 30
            while await h.status() != "blocked":
                assert time.monotonic() < end, "the run did not block"
                await asyncio.sleep(0.02)
            with pytest.raises(ValueError, match="cannot handle"):  # a failed run that undoes nothing
                await durable.run_workflow(app.failing, 1, world=world, run_id="plain")
        finally:
            world.close()

    asyncio.run(go())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a blocked saga (seeded in a subprocess)."""
    path = tmp_path_factory.mktemp("ui-saga") / "data"
    code = "from pathlib import Path\nfrom tests.ui.test_inspector_compensation import seed_saga\n"
    code += f"seed_saga(Path({str(path)!r}))\n"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[Server]:
    """``little ui`` over the seeded data directory."""
    with serve(data_dir) as s:
        yield s


def test_the_run_page_lists_each_compensation_with_its_key_state_attempts_and_outcome(
    page: Any, server: Server
) -> None:
    """The refund is confirmed with its result; the seat's undo failed after 2 attempts, with its error."""
    page.goto(f"{server.base}/runs/saga")
    expect(page.locator("#run-status .badge")).to_have_text("blocked")
    expect(page.locator(".run-blocked .reason")).to_have_text("compensation_failed")
    rows = page.locator("#compensations tr.compensation")
    expect(rows).to_have_count(2)
    refund, seat = rows.nth(0), rows.nth(1)
    expect(refund).to_have_attribute("data-key", "tool:bill_card#1")
    expect(refund.locator(".state .badge")).to_have_text("confirmed")
    expect(refund.locator(".attempts")).to_have_text("1")
    expect(refund.locator(".outcome")).to_have_text('"refunded ch-o1"')
    expect(seat).to_have_attribute("data-key", "tool:reserve_seat#0")
    expect(seat.locator(".state .badge")).to_have_text("failed")
    expect(seat.locator(".attempts")).to_have_text("2")
    expect(seat.locator(".outcome")).to_have_text("RuntimeError: venue offline for seat-o1 <b>now</b>")


def test_a_run_without_compensations_has_no_compensation_section(page: Any, server: Server) -> None:
    """The page of a failed run that had nothing to undo shows no compensation table."""
    page.goto(f"{server.base}/runs/plain")
    expect(page.locator("#run-status .badge")).to_have_text("failed")
    expect(page.locator("#compensations")).to_have_count(0)
