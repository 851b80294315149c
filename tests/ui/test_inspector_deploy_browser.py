"""A run's code version and its patch markers on its page, in a real headless chromium."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from tests.ui.harness import ROOT, Server, env, serve
from tests.ui.test_inspector_deploy import shown

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why, and fails under CI=true
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser


def seed_versions(data_dir: Path) -> None:
    """One run of the ``shown`` workflow that took the new side of its ``patched`` change."""
    world = durable.local_world(data_dir)
    try:
        assert asyncio.run(durable.run_workflow(shown, 2, world=world, run_id="versioned")) == 4
    finally:
        world.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with one finished run, seeded in a subprocess."""
    path = tmp_path_factory.mktemp("ui-deploy") / "data"
    code = "from pathlib import Path\nfrom tests.ui.test_inspector_deploy_browser import seed_versions\n"
    code += f"seed_versions(Path({str(path)!r}))\n"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[Server]:
    """``little ui`` over that data directory."""
    with serve(data_dir) as s:
        yield s


def test_the_run_page_shows_the_code_version_and_the_patch_marker(
    page: Any, server: Server, data_dir: Path
) -> None:
    """The page names the short hash of the run's recorded manifest and the key of its patch marker."""
    world = durable.local_world(data_dir)
    try:
        recorded = json.loads(world.log.read("versioned")[0][2])["manifest_hash"]
    finally:
        world.close()
    page.goto(f"{server.base}/runs/versioned")
    expect(page.locator("#run-status .badge")).to_have_text("completed")
    expect(page.locator("dd.run-code")).to_have_text(recorded[:19])
    expect(page.locator("body")).to_contain_text("patched[double-it]#0")
