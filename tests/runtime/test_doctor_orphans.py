"""`doctor` lists a run whose driver died at once, with what happens to it next, and when."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durable
from durable import Worker
from durable.runtime import control_of, run_status
from tests.conftest import Worlds
from tests.helpers.procs import run_here

HERE = "tests.helpers.procs.run_here"


@pytest.fixture(autouse=True)
def _bodies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_TEST_DIR", str(tmp_path))  # where run_here's bodies note themselves


async def _cut(world: durable.World, wf: object, value: object, run_id: str) -> None:
    """Drive the run until its call is cut, as its process dying would: it stays running, undriven."""
    run_here.CUT["armed"] = True
    try:
        with pytest.raises(KeyboardInterrupt):
            await durable.run_workflow(wf, value, world=world, run_id=run_id)
    finally:
        run_here.CUT["armed"] = False
    assert run_status(world, run_id).status == "running"


async def test_a_run_cut_inside_a_step_is_listed_at_once_with_the_worker_that_would_recover_it(
    worlds: Worlds,
) -> None:
    """No grace period: the run is orphaned, no live worker knows it, and the fix starts one."""
    await _cut(worlds.open(), run_here.thinking, 1, "t")
    world = worlds.open()  # another process looks
    (found,) = durable.doctor(world)
    assert (found.kind, found.run_id, found.reason, found.workflow) == (
        "unserved",
        "t",
        "no_worker",
        "thinking",
    )
    assert (
        found.message.startswith("orphaned: ") and "no live worker knows workflow 'thinking'" in found.message
    )
    assert found.fixes[0].startswith(f"little worker {HERE}:thinking")


async def test_a_plain_tool_cut_mid_call_gets_its_resolutions_before_any_worker_blocks_it(
    worlds: Worlds,
) -> None:
    """The doctor says the next drive blocks it (unknown_commit) and prints `little resolve` now; it works."""
    await _cut(worlds.open(), run_here.paying, 5, "p")
    world = worlds.open()
    (found,) = durable.doctor(world)
    assert (found.kind, found.reason, found.key) == ("unserved", "unknown_commit", "tool:charge#0")
    assert "its next drive blocks it (unknown_commit)" in found.message
    assert found.fixes[0].startswith("little resolve p 'tool:charge#0' --happened --result JSON")
    assert found.fixes[1].startswith("little resolve p 'tool:charge#0' --not-happened")
    h = durable.handle("p", world=world)
    await h.resolve("tool:charge#0", happened=True, result="charged 5 by hand", workflows=[run_here.paying])
    assert await h.result(timeout=30) == "done: charged 5 by hand"
    assert durable.doctor(world) == []


async def test_a_run_a_live_worker_will_recover_is_listed_with_when(worlds: Worlds) -> None:
    """With a live worker that knows the workflow, the run is listed as recovering, with the seconds left."""
    world = worlds.open()
    await _cut(world, run_here.thinking, 1, "t")
    ctl = control_of(world)
    for _ in range(4):  # four drives cut in a row, the last 1.5 s ago: the next one waits 4 s from it
        ctl.adopt("t", "thinking", owner="gone", pid=0, host="elsewhere", now=world.clock() - 1.5)
    async with Worker(worlds.open(), workflows=[run_here.thinking], name="w1"):
        (found,) = durable.doctor(world)
    assert (found.kind, found.reason, found.fixes) == ("dead_claim", "recovering", [])
    assert "(4 drives cut in a row)" in found.message
    said = re.search(
        r"worker w1 \(pid \d+ on .+\), which knows workflow 'thinking', recovers it within (\d+) s",
        found.message,
    )
    assert said is not None and 3 <= int(said.group(1)) <= 8


async def test_doctor_json_gives_reasons_as_reasons_and_the_workflow_apart(world: durable.World) -> None:
    """Every finding's reason is a reason word; the workflow and the key have fields of their own."""
    await _cut(world, run_here.thinking, 1, "t")
    durable.start_workflow(run_here.paying, 1, world=world, queue="nobody")
    found = [f.as_dict() for f in durable.doctor(world, stale=-1)]
    assert {(f["kind"], f["reason"], f["workflow"]) for f in found} == {
        ("unserved", "no_worker", "thinking"),
        ("unclaimed", "no_worker", "paying"),
    }
    assert all(
        set(f) == {"kind", "run_id", "reason", "workflow", "key", "message", "when", "fixes"} for f in found
    )
