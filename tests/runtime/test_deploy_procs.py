"""A deploy under live runs: workers of two versions of one code over one world (SQLite, Postgres)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.helpers.procs import deploy_app
from tests.runtime.unhappy import Procs, wait_for

pytestmark = pytest.mark.slow

APP = "tests.helpers.procs.deploy_app"


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes of the deploy app on each backend."""
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def _start(procs: Procs, x: int) -> durable.RunHandle:
    return durable.start_workflow(deploy_app.rollout, x, world=procs.world, queue=deploy_app.deploy)


def _open_gate(procs: Procs, x: int) -> None:
    (procs.tmp / f"gate-{x}").write_text("go")


def _committed(procs: Procs, run_id: str, path: str) -> bool:
    """Whether the run's log holds the step's output (the old code's use of it is recorded)."""
    if procs.world.log.info(run_id) is None:
        return False  # not claimed yet
    return any(e.type == "step.completed" and e.path == path for e in procs.world.events(run_id))  # type: ignore[union-attr]


def _waiting(procs: Procs, run_id: str) -> durable.RunStatus | None:
    st = procs.status(run_id)
    return st if st.reason == "waiting_for_code" else None


def test_a_deploy_fails_no_run_and_each_run_is_finished_by_code_that_can_replay_it(procs: Procs) -> None:
    """Old runs wait (holding no slot) under new code, new runs finish there, old code finishes the old."""
    old = procs.worker(APP)
    first = [_start(procs, x) for x in (1, 2)]
    for h in first:
        wait_for(lambda h=h: _committed(procs, h.run_id, "prepare"), 30, "the runs to commit prepare")
    procs.kill(old)
    new = procs.worker(APP, DURABLE_TEST_CODE="new")
    for h in first:
        st = wait_for(
            lambda h=h: _waiting(procs, h.run_id), 30, f"run {h.run_id} to wait ({procs.err_text()})"
        )
        assert st.status == "running"
        assert st.detail is not None and st.detail.startswith("waiting for code matching sha256:")
        assert "steps.prepare.signature" in st.detail
        assert st.fixes[0].startswith("little worker tests.helpers.procs.deploy_app:rollout")
    found = {f.run_id: f for f in durable.doctor(procs.world)}
    assert {h.run_id for h in first} <= set(found)
    assert all(found[h.run_id].kind == "waiting_for_code" for h in first)
    _open_gate(procs, 3)
    fresh = _start(procs, 3)  # the queue allows 2 at once: the two waiting runs hold no slot
    assert procs.ends(fresh.run_id, 30).status == "completed"
    assert [b["code"] for b in procs.bodies(step="finish", x=3)] == ["new"]
    _open_gate(procs, 1)
    _open_gate(procs, 2)
    procs.worker(APP)  # the old code again: it can replay the old runs
    for h in first:
        assert procs.ends(h.run_id, 30).status == "completed"
    assert [asyncio.run(h.result(timeout=5)) for h in [*first, fresh]] == [2, 4, 6]
    assert sorted((b["x"], b["code"]) for b in procs.bodies(step="finish")) == [
        (1, "old"),
        (2, "old"),
        (3, "new"),
    ]
    procs.stop(new)
    said = procs.err_text()
    for h in first:
        assert said.count(f"leaves run {h.run_id} alone") == 1
    assert "steps.prepare.signature" in said


def test_a_run_no_live_worker_can_serve_is_finished_once_a_matching_worker_starts(procs: Procs) -> None:
    """With only new code alive the old run waits and doctor lists it; an old worker then completes it."""
    old = procs.worker(APP)
    h = _start(procs, 5)
    wait_for(lambda: _committed(procs, h.run_id, "prepare"), 30, "the run to commit prepare")
    procs.kill(old)
    procs.worker(APP, DURABLE_TEST_CODE="new")
    wait_for(lambda: _waiting(procs, h.run_id), 30, "the run to wait for its code")
    listed = procs.little("doctor")
    assert h.run_id in listed.stdout and "waiting_for_code" in listed.stdout, listed.stdout
    runs = procs.little("runs")
    [line] = [line for line in runs.stdout.splitlines() if line.startswith(h.run_id)]
    recorded = procs.world.log.read(h.run_id)[0][2]
    assert json.loads(recorded)["manifest_hash"][:19] in line  # the short code version
    assert "no live worker's code can replay it" in line
    _open_gate(procs, 5)
    assert procs.status(h.run_id).status == "running"  # nobody fails it meanwhile
    procs.worker(APP)
    assert procs.ends(h.run_id, 30).status == "completed"
    assert [b["code"] for b in procs.bodies(step="finish", x=5)] == ["old"]
    assert not [f for f in durable.doctor(procs.world) if f.run_id == h.run_id]
