"""The inspector's run page: a run's code version, its patch markers, and what a waiting run waits for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.runtime._driver import control_of
from durable.runtime._serving import Waiting
from durable.ui._app import Inspector, create_app
from durable.ui._pages import run_href

testclient = pytest.importorskip("starlette.testclient")


@durable.step
async def new_path(x: int) -> int:
    return x * 2


@durable.workflow(name="shown")
async def shown(x: int) -> int:
    y = await new_path(x) if durable.patched("double-it") else x
    if x < 0:
        durable.interrupt("go on?")
    return y


def _page(world: durable.World, run_id: str) -> str:
    client = testclient.TestClient(create_app(Inspector(world, "t", {})), base_url="http://127.0.0.1:8787")
    got = client.get(run_href(run_id))
    assert got.status_code == 200
    return str(got.text)


def _manifest_hash(world: durable.World, run_id: str) -> Any:
    return json.loads(world.log.read(run_id)[0][2])["manifest_hash"]


def test_the_run_page_shows_the_short_code_version_and_the_patch_markers(tmp_path: Path) -> None:
    """The facts name sha256:<12 hex digits> of the run's manifest and each patch.marked key."""
    world = durable.local_world(tmp_path / "data")
    assert asyncio.run(durable.run_workflow(shown, 2, world=world, run_id="v1")) == 4
    page = _page(world, "v1")
    assert f'<dd class="run-code">{_manifest_hash(world, "v1")[:19]}</dd>' in page
    assert "patched[double-it]#0" in page
    world.close()


def test_the_run_page_of_a_waiting_run_says_which_code_it_waits_for(tmp_path: Path) -> None:
    """A run left waiting by a worker of other code shows 'waiting for code matching' and the drift key."""
    world = durable.local_world(tmp_path / "data")
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(shown, -2, world=world, run_id="v2"))
    ctl = control_of(world)
    ctl.adopt("v2", "shown", owner="w", pid=1, host="h", now=world.clock())
    ctl.wait_for_code("v2", Waiting(_manifest_hash(world, "v2"), ["steps.new_path.signature"]).text())
    st = durable.runtime.run_status(world, "v2")
    assert st.detail is not None
    page = _page(world, "v2")
    assert "waiting for code matching" in page and "steps.new_path.signature" in page
    world.close()
