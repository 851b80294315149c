"""A run blocked by its budget in the inspector, in a real headless chromium: its usage, and raising it."""

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


def seed_capped(data_dir: Path) -> None:
    """A run of three model calls whose budget allows one: it ends blocked (budget)."""

    async def go() -> None:
        world = durable.local_world(data_dir)
        try:
            h = await durable.start_workflow(
                app.capped, 3, world=world, run_id="capped", budget=durable.Budget(max_model_calls=1)
            )
            end = time.monotonic() + 30
            while await h.status() != "blocked":
                assert time.monotonic() < end, "the run did not block"
                await asyncio.sleep(0.02)
        finally:
            world.close()

    asyncio.run(go())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a run blocked by its budget (seeded in a subprocess)."""
    path = tmp_path_factory.mktemp("ui-budget") / "data"
    code = "from pathlib import Path\nfrom tests.ui.test_inspector_budget import seed_capped\n"
    code += f"seed_capped(Path({str(path)!r}))\n"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[Server]:
    """``little ui`` that knows the workflow, so it drives the resumed run."""
    with serve(data_dir, "--workflow", "tests.ui.app:capped") as s:
        yield s


def test_a_person_raises_a_spent_budget_from_the_inspector_and_the_run_completes(
    page: Any, server: Server
) -> None:
    """The page shows the reason, usage and budget; a raised budget, once confirmed, lets the run finish."""
    page.goto(f"{server.base}/runs/capped")
    expect(page.locator("#run-status .badge")).to_have_text("blocked")
    expect(page.locator(".run-blocked .reason")).to_have_text("budget")
    expect(page.locator("#run-usage")).to_contain_text("1 calls, 40 in + 10 out tokens")
    expect(page.locator("#run-budget")).to_have_text("calls<=1")
    page.fill("form.raise-budget textarea", '{"max_model_calls": 5}')
    page.click('button[data-action="raise-budget"]')
    expect(page.locator("h1")).to_have_text("Confirm: resume")
    page.click("#confirm")
    expect(page.locator("#run-status .badge")).to_have_text("completed", timeout=30_000)
    expect(page.locator("#run-usage")).to_contain_text("3 calls, 120 in + 30 out tokens")
    expect(page.locator("#run-budget")).to_have_text("calls<=5")
