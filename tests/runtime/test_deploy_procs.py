"""A deploy under live runs: workers of two versions of one code over one world (SQLite, Postgres)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.helpers.procs import deploy_app
from tests.runtime.unhappy import ROOT, Procs, wait_for

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


def _has(procs: Procs, run_id: str, type_: str, where: str) -> bool:
    """Whether the run's log holds an event of ``type_`` at ``where`` (its path or key)."""
    if procs.world.log.info(run_id) is None:
        return False
    return any(
        e.type == type_ and where in (getattr(e, "path", None), getattr(e, "key", None))
        for e in procs.world.events(run_id)
    )


def _start_on(procs: Procs, wf: object, x: int) -> durable.RunHandle:
    return durable.start_workflow(wf, x, world=procs.world, queue=deploy_app.deploy)


def _gate(procs: Procs, name: str) -> None:
    (procs.tmp / f"gate-{name}").write_text("go")


def test_a_run_continued_by_new_code_is_finished_by_it_and_left_alone_by_the_old(procs: Procs) -> None:
    """New code that made a run's calls finishes it after a crash; old code waits instead of blocking it."""
    old = procs.worker(APP)
    h = _start_on(procs, deploy_app.mixed, 7)
    wait_for(lambda: _has(procs, h.run_id, "step.completed", "begin"), 30, "old code to commit begin")
    procs.kill(old)
    new = procs.worker(APP, DURABLE_TEST_CODE="new")  # nothing the run used changed: it continues it
    _gate(procs, "7a")
    wait_for(lambda: _has(procs, h.run_id, "step.completed", "settle"), 30, "new code to commit settle")
    procs.kill(new)
    procs.worker(APP)  # old code only: the run's calls are the new code's, so it must leave it alone
    st = wait_for(
        lambda: _waiting(procs, h.run_id), 30, f"the old code to leave the run ({procs.err_text()})"
    )
    assert st.detail is not None and "steps.settle.signature" in st.detail
    assert procs.little("dry-resume", f"{APP}:mixed", h.run_id, DURABLE_TEST_CODE="new").returncode == 0
    assert procs.little("dry-resume", f"{APP}:mixed", h.run_id).returncode == 1
    procs.worker(APP, DURABLE_TEST_CODE="new")
    _gate(procs, "7b")
    assert procs.ends(h.run_id, 30).status == "completed"
    assert asyncio.run(h.result(timeout=5)) == 8
    assert [(b["x"], b["code"]) for b in procs.bodies(step="settle")] == [(7, "new")]
    exported = procs.tmp / "mixed.json"
    exported.write_text(procs.little("export", h.run_id).stdout)
    replay = "; ".join(
        [
            "from durable.testing import replay_file",
            f"from {APP} import mixed",
            f"replay_file({str(exported)!r}, mixed)",
        ]
    )
    assert _python(procs, replay, DURABLE_TEST_CODE="new").returncode == 0
    under_old = _python(procs, replay)
    assert under_old.returncode == 1 and "CapabilityDriftError" in under_old.stderr


def _python(procs: Procs, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**procs.env, **extra}, capture_output=True, text=True
    )


def _interrupted(procs: Procs, h: durable.RunHandle) -> None:
    wait_for(lambda: procs.status(h.run_id).status == "interrupted", 30, "the run to wait for its answer")


def test_new_code_whose_replay_diverges_leaves_the_run_to_a_live_worker_of_its_code(procs: Procs) -> None:
    """A run answered mid-deploy is claimed by new code that inserted a call; the old code finishes it."""
    old = procs.worker(APP)
    h = _start_on(procs, deploy_app.approval, 3)
    _interrupted(procs, h)
    procs.kill(old)
    asyncio.run(h.answer("yes"))  # back on its queue (answered first: no worker recovers it meanwhile)
    procs.worker(APP, DURABLE_TEST_QUEUES="")  # old code, alive, claiming nothing: only recovering
    procs.worker(APP, DURABLE_TEST_CODE="new")  # the only one claiming from the queue
    assert procs.ends(h.run_id, 30).status == "completed", procs.err_text()
    assert asyncio.run(h.result(timeout=5)) == "3:yes"
    assert [b["code"] for b in procs.bodies(step="publish")] == ["old"]
    assert procs.bodies(step="review") == []
    said = procs.err_text()
    assert said.count(f"leaves run {h.run_id} alone") == 1 and "diverges" in said


def test_a_run_left_to_a_worker_of_its_code_that_dies_before_taking_it_is_blocked(procs: Procs) -> None:
    """The worker a divergent run was left to dies without driving it: the run does not wait forever."""
    old = procs.worker(APP)
    h = _start_on(procs, deploy_app.approval, 5)
    _interrupted(procs, h)
    procs.kill(old)
    alive = procs.worker(APP, DURABLE_TEST_REGISTER_ONLY="1")  # old code, registered, drives nothing
    asyncio.run(h.answer("go"))
    procs.worker(APP, DURABLE_TEST_CODE="new")
    wait_for(
        lambda: procs.status(h.run_id).reason == "waiting_for_code", 30, "the run to be left to the old code"
    )
    procs.kill(alive)
    st = procs.ends(h.run_id, 30)
    assert (st.status, st.reason) == ("blocked", "nondeterminism"), st
    assert st.fixes[0].startswith(f"little worker {APP}:approval --queue deploy"), st.fixes


def test_a_divergent_run_is_blocked_only_when_no_worker_of_its_code_lives_and_says_so(procs: Procs) -> None:
    """With only new code alive the run blocks, naming its code; a worker of it and a resume finish it."""
    old = procs.worker(APP)
    h = _start_on(procs, deploy_app.approval, 4)
    _interrupted(procs, h)
    procs.kill(old)
    asyncio.run(h.answer("go"))
    procs.worker(APP, DURABLE_TEST_CODE="new")
    st = procs.ends(h.run_id, 30)
    assert (st.status, st.reason) == ("blocked", "nondeterminism")
    assert st.fixes[0].startswith(f"little worker {APP}:approval --queue deploy"), st.fixes
    with pytest.raises(durable.RunBlockedError, match="no live worker runs"):
        asyncio.run(h.result(timeout=5))
    listed = procs.little("doctor")
    assert f"matches the log): little worker {APP}:approval" in listed.stdout, listed.stdout
    procs.worker(APP, DURABLE_TEST_QUEUES="")  # what the first fix starts (old code, recovering)
    assert procs.little_line(st.fixes[1]).returncode == 0  # then: little resume RUN
    assert procs.ends(h.run_id, 30).status == "completed", procs.err_text()
    assert asyncio.run(h.result(timeout=5)) == "4:go"


def _tool_called_then_deployed(
    procs: Procs, wf: object, x: int, key: str
) -> tuple[durable.RunHandle, durable.RunStatus]:
    """A run whose old code called a tool and waits; then new code only: the run waits for its code."""
    old = procs.worker(APP)
    h = _start_on(procs, wf, x)
    wait_for(lambda: _has(procs, h.run_id, "effect.receipt", key), 30, "the tool's receipt")
    procs.kill(old)
    procs.worker(APP, DURABLE_TEST_CODE="new")
    st = wait_for(lambda: _waiting(procs, h.run_id), 30, f"the run to wait ({procs.err_text()})")
    return h, st


def test_accepting_a_tool_signature_drift_from_the_printed_fix_finishes_the_run(procs: Procs) -> None:
    """The accept-drift fix a waiting run prints resumes it under new code; the tool is not called again."""
    h, st = _tool_called_then_deployed(procs, deploy_app.shipping, 5, "tool:ship#0")
    [fix] = [f for f in st.fixes if "--accept-drift" in f]
    assert "tools.ship.signature" in fix
    assert procs.little_line(fix).returncode == 0
    _gate(procs, "ship5")
    assert procs.ends(h.run_id, 30).status == "completed", procs.err_text()
    assert asyncio.run(h.result(timeout=5)) == "shipped order-5"
    assert [b["code"] for b in procs.bodies(tool="ship")] == ["old"]


def test_a_drift_that_accepting_cannot_get_past_is_not_offered_and_says_why(procs: Procs) -> None:
    """A tool gained a parameter with no default: no accept-drift fix; status, doctor, dry-resume say why."""
    h, st = _tool_called_then_deployed(procs, deploy_app.labelling, 6, "tool:label#0")
    assert not [f for f in st.fixes if "--accept-drift" in f], st.fixes
    assert st.detail is not None and "would not help" in st.detail and "'copies'" in st.detail
    listed = procs.little("doctor")
    assert h.run_id in listed.stdout and "would not help" in listed.stdout, listed.stdout
    dry = procs.little("dry-resume", f"{APP}:labelling", h.run_id, DURABLE_TEST_CODE="new")
    assert dry.returncode == 1 and "would not help" in dry.stdout and "'copies'" in dry.stdout, dry.stdout


# -- a rolling deploy under SIGKILLs ---------------------------------------------------------
#
# Runs are submitted all along; workers of the old and the new code of ``deploy_app.rolling``
# serve them while one worker after another is SIGKILLed, each replaced by a worker of its own
# code (each version keeps a live worker throughout). The new code inserted a call, made a
# step's signature compatibly larger and renamed another's parameter: so there are old runs
# the new code cannot replay, new runs the old code cannot, and old runs the new code continues
# (its manifest then becomes the run's). Every run must complete: none is failed or blocked
# because a worker of the other version saw it first.

KILLS = 6
PACE = 0.2
"""Seconds between two submitted runs, from the first worker's start to the last kill."""


def test_a_rolling_deploy_under_kills_finishes_every_run(procs: Procs) -> None:
    """Every run completes with its output, whichever code made which of its calls."""
    rng = random.Random(51)
    env = {"DURABLE_TEST_QUEUES": "rolling"}
    alive = {"old": [procs.worker(APP, DURABLE_TEST_CODE="old", **env) for _ in range(2)], "new": []}
    handles: list[durable.RunHandle] = []
    killing = threading.Event()

    def submit() -> None:
        while not killing.is_set() or len(handles) < 10:
            run = durable.start_workflow(
                deploy_app.rolling, len(handles), world=procs.world, queue=deploy_app.rolling_queue
            )
            handles.append(run)
            time.sleep(PACE)

    submitter = threading.Thread(target=submit)
    submitter.start()
    try:
        time.sleep(1.0)  # old runs in flight: the deploy starts, new workers join the old ones
        alive["new"] = [procs.worker(APP, DURABLE_TEST_CODE="new", **env) for _ in range(2)]
        for k in range(KILLS):
            version = "old" if k % 3 != 2 else "new"  # mostly old ones, as a deploy replaces them
            victim = alive[version].pop(rng.randrange(len(alive[version])))
            procs.kill(victim)  # its version still has a live worker
            alive[version].append(procs.worker(APP, DURABLE_TEST_CODE=version, **env))
            time.sleep(rng.uniform(0.1, 0.4))
    finally:
        killing.set()
        submitter.join()
    ends = {h.run_id: procs.ends(h.run_id, 180) for h in handles}
    stuck = {rid: (st.status, st.reason, st.detail) for rid, st in ends.items() if st.status != "completed"}
    assert not stuck, f"{stuck}\n{procs.err_text()[-4000:]}"
    outputs = [asyncio.run(h.result(timeout=10)) for h in handles]
    assert outputs == [(i + deploy_app.TICKS) * 10 + 1 for i in range(len(handles))]
    taken = sum(1 for h in handles if any(e.type == "drift.accepted" for e in procs.world.events(h.run_id)))
    said = procs.err_text()
    left = sum(1 for h in handles if f"leaves run {h.run_id} alone" in said)
    shown = f"{len(handles)} runs, {KILLS} kills, {taken} taken over, {left} left to the other code"
    print(f"\n{procs.kind}: {shown}")  # with -s: how much the two versions met
