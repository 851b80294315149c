"""Processes SIGKILLed while a run is undone: the next one finishes it, once (SQLite, Postgres)."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.runtime.unhappy import ROOT, Procs, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes of the unhappy app on each backend."""
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def test_a_kill_inside_a_compensation_resumes_the_undoing_on_another_worker(procs: Procs) -> None:
    """Killed while unbook runs: the next worker re-drives it with the same key, then unpay runs once."""
    w = procs.worker()
    h = durable.start_workflow(procs.app.saga, "r7", world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.bodies(tool="unbook"), 20, "the compensation to start")
    procs.kill(w)
    (procs.tmp / "go").touch()
    procs.worker()
    st = procs.ends(h.run_id, 30)
    assert st.status == "failed"
    assert st.compensated == ["compensate:tool:book_room#1", "compensate:tool:pay_room#0"]
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(h.result(timeout=5))
    procs.settle()
    unbooks = procs.bodies(tool="unbook")
    assert len(unbooks) == 2  # cut mid-call, idempotent: re-driven
    assert unbooks[0]["key"] == unbooks[1]["key"] == f"{h.run_id}:compensate:tool:book_room#1"
    assert [b["result"] for b in procs.bodies(tool="unpay")] == ["paid-r7"]
    assert len(procs.bodies(tool="book_room")) == 1
    assert len(procs.bodies(tool="pay_room")) == 1
    assert len(procs.bodies(wf="saga")) == 2


def test_a_kill_between_a_runtime_recorded_failure_and_its_end_compensates_exactly_once(procs: Procs) -> None:
    """Killed after the undos of a MaxVisitsExceededError and before run.failed: the next worker ends it."""
    w = procs.worker(DURABLE_TEST_HOLD_END="1")
    h = durable.start_workflow(procs.app.visits_saga, "r8", world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: (procs.tmp / "holding-end").exists(), 30, "the worker to reach the run's end")
    assert [b["result"] for b in procs.bodies(tool="unlend")] == ["car-r8"]
    assert [b["result"] for b in procs.bodies(tool="unpay")] == ["paid-r8"]
    assert procs.status(h.run_id).status == "running"  # no end recorded
    procs.kill(w)
    procs.worker()
    st = procs.ends(h.run_id, 30)
    assert st.status == "failed"
    assert st.error is not None and st.error["error_type"].endswith("MaxVisitsExceededError")
    assert st.compensated == ["compensate:tool:lend_car#1", "compensate:tool:pay_room#0"]
    procs.settle()
    assert len(procs.bodies(wf="visits_saga")) == 2  # the killed drive, and the one that ended it
    assert len(procs.bodies(tool="unlend")) == 1
    assert len(procs.bodies(tool="unpay")) == 1
    assert len(procs.bodies(tool="pay_room")) == 1
    assert len(procs.bodies(tool="lend_car")) == 1


WAITING_SAGA = "tests.helpers.procs.unhappy_app:waiting_saga"


def _cancel_killed_in_its_undo(procs: Procs, run_id: str) -> list[str]:
    """`little cancel --workflow` of a waiting saga, SIGKILLed once unbook runs; its command line."""
    command = [sys.executable, "-m", "durable.cli", "cancel", run_id, "--workflow", WAITING_SAGA, "--json"]
    cancel = subprocess.Popen(
        [*command, *procs.cli_args()], cwd=ROOT, env=procs.env, stdout=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: procs.bodies(tool="unbook"), 30, "the compensation to start")
        cancel.kill()
        cancel.wait()
    finally:
        assert cancel.stdout is not None
        cancel.stdout.close()
    return command


def test_a_little_cancel_killed_inside_a_compensation_is_finished_by_the_next_one(procs: Procs) -> None:
    """`little cancel --workflow` of a waiting saga, SIGKILLed inside unbook: run again, it finishes once."""
    procs.worker()
    h = durable.start_workflow(procs.app.waiting_saga, "r9", world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.status(h.run_id).status == "interrupted", 30, "the run to wait for its answer")
    command = _cancel_killed_in_its_undo(procs, h.run_id)
    assert procs.status(h.run_id).status == "interrupted"  # no end recorded
    (procs.tmp / "go").touch()

    def cancel_again() -> str:
        done = subprocess.run(
            [*command, *procs.cli_args()],
            cwd=ROOT,
            env=procs.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["status"])

    # On Postgres the killed canceller's lease on the run lasts until it runs out; until then the run
    # is left to its driver, which is gone: the cancel is asked again until the lease has passed.
    wait_for(lambda: cancel_again() == "cancelled", 60, "the run to be cancelled")
    st = procs.status(h.run_id)
    assert st.compensated == ["compensate:tool:book_room#1", "compensate:tool:pay_room#0"]
    unbooks = procs.bodies(tool="unbook")
    assert len(unbooks) == 2  # cut mid-call, idempotent: re-driven with the same key
    assert unbooks[0]["key"] == unbooks[1]["key"] == f"{h.run_id}:compensate:tool:book_room#1"
    assert [b["result"] for b in procs.bodies(tool="unpay")] == ["paid-r9"]
    assert len(procs.bodies(tool="pay_room")) == 1


def test_an_answer_after_a_cancel_cut_inside_a_compensation_is_refused_and_the_run_stays_cancelled(
    procs: Procs,
) -> None:
    """`little cancel --workflow` SIGKILLed in unbook, then `little answer`: refused; the fix cancels it."""
    w = procs.worker()
    h = durable.start_workflow(procs.app.waiting_saga, "r10", world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.status(h.run_id).status == "interrupted", 30, "the run to wait for its answer")
    procs.stop(w)  # nobody but the canceller drives it
    _cancel_killed_in_its_undo(procs, h.run_id)
    (procs.tmp / "go").touch()

    def answer() -> subprocess.CompletedProcess[str] | None:
        done = procs.little("answer", h.run_id, json.dumps("yes"), "--workflow", WAITING_SAGA)
        # On Postgres the killed canceller holds the run until its lease runs out.
        return None if "right now" in done.stderr else done

    answered = wait_for(answer, 60, "the killed canceller's lease to pass")
    assert answered.returncode != 0
    assert "is being cancelled" in answered.stderr
    st = procs.status(h.run_id)
    assert st.status == "interrupted"
    assert st.fixes == [f"little cancel {h.run_id} --workflow {WAITING_SAGA}{procs.where()}"]
    done = procs.little_line(st.fixes[0])
    assert done.returncode == 0, done.stderr
    st = procs.ends(h.run_id, 30)
    assert st.status == "cancelled"
    assert st.compensated == ["compensate:tool:book_room#1", "compensate:tool:pay_room#0"]
    assert not any(e.type == "interrupt.resumed" for e in procs.world.events(h.run_id))


SAGAS = "tests.helpers.procs.saga_app"


def _drive(procs: Procs, wf: str, trip: str, run_id: str) -> subprocess.Popen[str]:
    """A process that runs (or resumes) the run with run_workflow, printing its outcome as JSON."""
    return subprocess.Popen(
        [sys.executable, "-m", SAGAS, "drive", wf, trip, run_id],
        cwd=ROOT,
        env=procs.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_run_workflow_killed_inside_an_undo_of_a_call_made_in_a_step_resumes_every_undo(procs: Procs) -> None:
    """SIGKILL in cancel_room, run_workflow again in a new process: it is re-driven, then return_car runs."""
    first = _drive(procs, "step_trip", "t1", "s1")
    try:
        wait_for(lambda: procs.bodies(tool="cancel_room"), 30, "the undo to start")
    finally:
        first.kill()
        first.communicate()
    (procs.tmp / "go").touch()
    again = _drive(procs, "step_trip", "t1", "s1")
    out, err = again.communicate(timeout=120)
    assert json.loads(out) == {"error": "NonRetryableError"}, err
    st = procs.status("s1")
    assert st.status == "failed"
    assert st.compensated == ["compensate:reserve.tool:book_room#1", "compensate:reserve.tool:rent_car#0"]
    rooms = procs.bodies(tool="cancel_room")
    assert len(rooms) == 2  # cut mid-call and idempotent: re-driven with its key
    assert rooms[0]["key"] == rooms[1]["key"] == "s1:compensate:reserve.tool:book_room#1"
    assert [b["result"] for b in procs.bodies(tool="return_car")] == ["car-t1"]
    assert len(procs.bodies(tool="book_room")) == len(procs.bodies(tool="rent_car")) == 1


def test_a_worker_killed_inside_an_undo_of_a_call_made_in_a_step_is_finished_by_the_next(
    procs: Procs,
) -> None:
    """The same under a worker: the next worker replays the step whole and still runs both undos."""
    from tests.helpers.procs import saga_app

    w = procs.worker(SAGAS)
    h = durable.start_workflow(saga_app.step_trip, "t2", world=procs.world, queue=saga_app.sagas)
    wait_for(lambda: procs.bodies(tool="cancel_room"), 30, "the undo to start")
    procs.kill(w)
    (procs.tmp / "go").touch()
    procs.worker(SAGAS)
    st = procs.ends(h.run_id, 30)
    assert st.status == "failed"
    assert st.compensated == ["compensate:reserve.tool:book_room#1", "compensate:reserve.tool:rent_car#0"]
    assert len(procs.bodies(tool="cancel_room")) == 2
    assert [b["result"] for b in procs.bodies(tool="return_car")] == ["car-t2"]


def _blocked_in_release(
    procs: Procs, wf: str, trip: str, cancel: bool
) -> tuple[durable.RunHandle, durable.RunStatus]:
    """A saga whose worker is SIGKILLed inside its plain release_room; the next worker blocks it."""
    from tests.helpers.procs import saga_app

    w = procs.worker(SAGAS)
    h = durable.start_workflow(getattr(saga_app, wf), trip, world=procs.world, queue=saga_app.sagas)
    if cancel:
        wait_for(lambda: procs.bodies(tool="hold_room"), 30, "the room to be held")
        asyncio.run(h.cancel())
    wait_for(lambda: procs.bodies(tool="release_room"), 30, "the undo to start")
    procs.kill(w)
    (procs.tmp / "go").touch()
    procs.worker(SAGAS)
    st = procs.ends(h.run_id, 30)
    assert (st.status, st.reason) == ("blocked", "unknown_commit")
    assert st.error is not None and st.error["key"] == "compensate:tool:hold_room#1"
    return h, st


@pytest.mark.parametrize("happened", [False, True], ids=["not_happened", "happened"])
def test_a_cancelled_run_whose_plain_undo_was_cut_ends_cancelled_once_resolved(
    procs: Procs, happened: bool
) -> None:
    """Resolved from the shell, the cut undo runs again (or is taken as done), then the older one."""
    h, st = _blocked_in_release(procs, "waiting_trip", "t3", cancel=True)
    key = shlex.quote(st.error["key"])  # type: ignore[index]
    decision = (
        f"--happened --result {shlex.quote(json.dumps('released by hand'))} --workflow {SAGAS}:waiting_trip"
        if happened
        else "--not-happened"
    )
    done = procs.little(*shlex.split(f"resolve {h.run_id} {key} {decision}"))
    assert done.returncode == 0, done.stderr
    st = procs.ends(h.run_id, 30)
    assert st.status == "cancelled"
    assert st.compensated == ["compensate:tool:hold_room#1", "compensate:tool:rent_car#0"]
    assert len(procs.bodies(tool="release_room")) == (1 if happened else 2)
    assert [b["result"] for b in procs.bodies(tool="return_car")] == ["car-t3"]
    assert not [e for e in procs.world.events(h.run_id) if e.type == "run.completed"]


def test_the_printed_fix_resolves_a_cut_undo_as_happened(procs: Procs) -> None:
    """`little resolve RUN compensate:... --happened --result JSON --workflow ...`, as printed, works."""
    h, st = _blocked_in_release(procs, "failed_trip", "t4", cancel=False)
    assert st.fixes[0].startswith(f"little resolve {h.run_id} ")
    assert " --workflow tests.helpers.procs.saga_app:failed_trip" in st.fixes[0]
    done = procs.little_line(st.fixes[0].replace("JSON", shlex.quote(json.dumps("released held-t4"))))
    assert done.returncode == 0, done.stderr
    st = procs.ends(h.run_id, 30)
    assert st.status == "failed"
    assert st.compensated == ["compensate:tool:hold_room#1", "compensate:tool:rent_car#0"]
    assert len(procs.bodies(tool="release_room")) == 1  # taken as done: not called again
    assert [b["result"] for b in procs.bodies(tool="return_car")] == ["car-t4"]
    receipt = [e for e in procs.world.events(h.run_id) if e.type == "run.resolved"][-1]
    assert (receipt.decision, receipt.key, receipt.result) == (
        "happened",
        "compensate:tool:hold_room#1",
        "released held-t4",
    )  # type: ignore[union-attr]
