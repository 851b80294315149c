"""Every run ends, or says why and how to fix it: real worker processes, SIGKILL, SQLite and Postgres."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable.runtime import HOST
from durable.runtime._driver import control_of
from tests.helpers.procs import worker_object
from tests.runtime.unhappy import ROOT, Procs, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes of the unhappy app on each backend."""
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


FAILED_FOR_GOOD = [
    ("max_visits", "MaxVisitsExceededError"),
    ("serialization", "SerializationError"),
    ("configuration", "ConfigurationError"),
    ("plain_error", "ValueError"),
    ("non_retryable", "NonRetryableError"),
]


@pytest.mark.parametrize(("name", "error"), FAILED_FOR_GOOD)
def test_an_error_no_redrive_can_fix_fails_the_run_once_and_for_all(
    procs: Procs, name: str, error: str
) -> None:
    """The run ends failed with its error within seconds, and no worker drives it again afterwards."""
    procs.worker()
    h = durable.start_workflow(getattr(procs.app, name), 1, world=procs.world, queue=procs.app.unhappy)
    st = procs.ends(h.run_id, 20)
    assert st.status == "failed"
    assert st.error is not None and st.error["error_type"].endswith(error)
    assert st.fixes and st.fixes[0].startswith(f"little resume {h.run_id}")
    with pytest.raises(Exception) as raised:  # noqa: PT011  (the type is the parameter: checked below)
        asyncio.run(h.result(timeout=5))
    assert type(raised.value).__name__ == error
    events = procs.events(h.run_id)
    procs.settle()
    assert len(procs.bodies(wf=name)) == 1
    assert procs.events(h.run_id) == events


def test_a_plain_tool_cut_mid_call_blocks_the_run_and_happened_records_the_result(procs: Procs) -> None:
    """SIGKILL inside a plain tool: blocked (unknown_commit); resolved as happened, the tool ran once."""
    w = procs.worker()
    h = durable.start_workflow(procs.app.unknown_commit, 250, world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.bodies(tool="charge"), 20, "the tool to start")
    procs.kill(w)
    procs.worker()
    st = procs.ends(h.run_id, 20)
    assert (st.status, st.reason) == ("blocked", "unknown_commit")
    assert st.error is not None
    key = st.error["key"]
    code = " --workflow tests.helpers.procs.unhappy_app:unknown_commit"
    assert st.fixes[0] == (
        f"little resolve {h.run_id} {shlex.quote(key)} --happened --result JSON{code}{procs.where()}"
    )
    with pytest.raises(durable.RunBlockedError) as blocked:
        asyncio.run(h.result(timeout=5))
    assert blocked.value.reason == "unknown_commit"
    assert isinstance(blocked.value.cause, durable.UnknownCommitError)
    assert blocked.value.fixes == st.fixes
    procs.settle()
    assert len(procs.bodies(wf="unknown_commit")) == 2  # the cut drive and the one that blocked
    done = procs.little_line(st.fixes[0].replace("JSON", shlex.quote(json.dumps("charged 250"))))
    assert done.returncode == 0, done.stderr
    assert procs.ends(h.run_id, 20).status == "completed"
    assert asyncio.run(h.result(timeout=5)) == "done: charged 250"
    assert len(procs.bodies(tool="charge")) == 1
    resolved = [e for e in procs.world.events(h.run_id) if e.type == "run.resolved"]
    assert [(e.decision, e.key) for e in resolved] == [("happened", key)]
    assert resolved[0].by and resolved[0].decided_at > 0


def test_a_plain_tool_cut_in_a_child_run_is_resolved_there_by_the_printed_command(procs: Procs) -> None:
    """SIGKILL in a child run's plain tool: the parent's fix names the child; run as printed, it finishes."""
    w = procs.worker()
    h = durable.start_workflow(
        procs.app.unknown_commit_in_child, 250, world=procs.world, queue=procs.app.unhappy
    )
    wait_for(lambda: procs.bodies(tool="charge"), 20, "the tool to start")
    procs.kill(w)
    procs.worker()
    st = procs.ends(h.run_id, 20)
    assert (st.status, st.reason) == ("blocked", "unknown_commit")
    assert st.error is not None
    child, key = st.error["run_id"], st.error["key"]
    assert procs.world.log.info(child).parent_run_id == h.run_id  # type: ignore[union-attr]
    code = " --workflow tests.helpers.procs.unhappy_app:unknown_commit_in_child"
    resolve = f"little resolve {shlex.quote(child)} {shlex.quote(key)}"
    assert st.fixes[0] == f"{resolve} --happened --result JSON{code}{procs.where()}"
    done = procs.little_line(st.fixes[0].replace("JSON", shlex.quote(json.dumps("charged 250"))))
    assert done.returncode == 0, done.stderr
    assert procs.ends(h.run_id, 20).status == "completed"
    assert asyncio.run(h.result(timeout=5)) == "ordered, done: charged 250"
    assert len(procs.bodies(tool="charge")) == 1
    resolved = [e for e in procs.world.events(child) if e.type == "run.resolved"]
    assert [(e.decision, e.key) for e in resolved] == [("happened", key)]


def test_a_plain_tool_resolved_as_not_happened_runs_again_with_the_same_key(procs: Procs) -> None:
    """Resolved as not happened from Python, the tool body runs a second time, with the same key."""
    w = procs.worker()
    h = durable.start_workflow(procs.app.unknown_commit, 7, world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.bodies(tool="charge"), 20, "the tool to start")
    procs.kill(w)
    procs.worker()
    st = procs.ends(h.run_id, 20)
    assert st.status == "blocked"
    assert st.error is not None
    (procs.tmp / "go").touch()
    asyncio.run(durable.handle(h.run_id, world=procs.world).resolve(st.error["key"], happened=False))
    assert procs.ends(h.run_id, 20).status == "completed"
    calls = procs.bodies(tool="charge")
    assert len(calls) == 2
    assert calls[0]["key"] == calls[1]["key"]


def test_a_result_that_does_not_fit_the_tools_return_type_is_refused(procs: Procs) -> None:
    """happened=True with a result of the wrong type writes nothing and says why."""
    w = procs.worker()
    h = durable.start_workflow(procs.app.unknown_commit, 1, world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.bodies(tool="charge"), 20, "the tool to start")
    procs.kill(w)
    procs.worker()
    st = procs.ends(h.run_id, 20)
    assert st.error is not None
    before = procs.events(h.run_id)
    with pytest.raises(durable.ConfigurationError, match="not a valid result"):
        asyncio.run(
            durable.handle(h.run_id, world=procs.world).resolve(
                st.error["key"], happened=True, result={"no": 1}, workflows=[procs.app.unknown_commit]
            )
        )
    assert procs.events(h.run_id) == before
    assert procs.status(h.run_id).status == "blocked"


def test_nondeterminism_blocks_the_run_and_resume_after_the_fix_completes_it(procs: Procs) -> None:
    """Code that no longer matches the log blocks the run; restored, `little resume` completes it."""
    procs.worker()
    h = durable.start_workflow(procs.app.nondeterminism, 2, world=procs.world, queue=procs.app.unhappy)
    assert procs.ends(h.run_id, 20).status == "interrupted"
    (procs.tmp / "shifted").touch()
    asyncio.run(durable.handle(h.run_id, world=procs.world).answer(3))  # this process never saw the input
    st = procs.ends(h.run_id, 20)
    assert (st.status, st.reason) == ("blocked", "nondeterminism")
    procs.settle()
    assert len(procs.bodies(wf="nondeterminism")) == 2
    (procs.tmp / "shifted").unlink()
    done = procs.little("resume", h.run_id)
    assert done.returncode == 0, done.stderr
    assert procs.ends(h.run_id, 20).status == "completed"
    assert asyncio.run(h.result(timeout=5)) == 5


def test_drift_leaves_the_run_waiting_and_accept_drift_resumes_it(procs: Procs) -> None:
    """Changed code leaves the run waiting with its drift keys; `resume --accept-drift` completes it."""
    old = procs.worker()
    h = durable.start_workflow(procs.app.drift, 1, world=procs.world, queue=procs.app.unhappy)
    assert procs.ends(h.run_id, 20).status == "interrupted"
    procs.stop(old)
    procs.worker(DURABLE_TEST_VERSION="2")
    answered = procs.little("answer", h.run_id, "41")
    assert answered.returncode == 0, answered.stderr
    st = wait_for(
        lambda: (s := procs.status(h.run_id)).reason == "waiting_for_code" and s, 20, "a waiting run"
    )
    assert st.detail is not None and "workflow.options.version" in st.detail
    assert st.fixes[1] == f"little resume {h.run_id} --accept-drift workflow.options.version{procs.where()}"
    procs.settle()
    assert len(procs.bodies(wf="drift")) == 1  # the drift is found before the body runs again
    assert procs.status(h.run_id).reason == "waiting_for_code"  # nothing failed it meanwhile
    done = procs.little_line(st.fixes[1])
    assert done.returncode == 0, done.stderr
    assert procs.ends(h.run_id, 20).status == "completed"
    assert asyncio.run(h.result(timeout=5)) == 42


def test_a_poison_run_ends_recovery_exhausted_while_the_rest_of_its_queue_completes(procs: Procs) -> None:
    """A run that SIGKILLs its worker every time is blocked after its recoveries; the others complete."""
    poison = durable.start_workflow(procs.app.poison, 0, world=procs.world, queue=procs.app.unhappy)
    others = [
        durable.start_workflow(procs.app.healthy, i, world=procs.world, queue=procs.app.unhappy)
        for i in range(5)
    ]

    def keep_a_worker() -> bool:
        if all(p.poll() is not None for p in procs.procs):
            procs.worker()
        st = procs.status(poison.run_id).status
        return st == "blocked" and all(procs.status(o.run_id).status == "completed" for o in others)

    wait_for(keep_a_worker, 90, "the poison run to be blocked and the others to complete")
    st = procs.status(poison.run_id)
    assert (st.status, st.reason) == ("blocked", "recovery_exhausted")
    assert st.fixes[0] == f"little resume {poison.run_id}{procs.where()}"
    assert len(procs.bodies(wf="poison")) == 3  # the first drive and max_recovery_attempts=2 recoveries
    procs.settle()
    assert len(procs.bodies(wf="poison")) == 3
    assert procs.err_text().count(f"run {poison.run_id!r} is blocked") == 1  # one warning, not one per pass


def test_doctor_says_nothing_on_a_healthy_world_and_lists_each_stuck_run(procs: Procs) -> None:
    """`little doctor` exits 0 on a healthy world, and lists a blocked run with its fix (exit 1)."""
    w = procs.worker()
    procs.settle()
    healthy = procs.little("doctor")
    assert healthy.returncode == 0, healthy.stderr
    h = durable.start_workflow(procs.app.unknown_commit, 5, world=procs.world, queue=procs.app.unhappy)
    wait_for(lambda: procs.bodies(tool="charge"), 20, "the tool to start")
    procs.kill(w)
    procs.worker()
    assert procs.ends(h.run_id, 20).status == "blocked"
    sick = procs.little("doctor", "--json")
    assert sick.returncode == 1
    found = json.loads(sick.stdout)
    assert [(f["kind"], f["run_id"], f["reason"]) for f in found] == [("blocked", h.run_id, "unknown_commit")]
    assert found[0]["fixes"][0].startswith(f"little resolve {h.run_id} ")
    text = procs.little("doctor")
    assert text.returncode == 1
    assert text.stdout.strip().startswith(f"{h.run_id}: blocked (unknown_commit)")


WORKER_OBJECT = "tests.helpers.procs.worker_object:worker"
DEFAULT_RECOVERIES = 5
"""``Worker``'s default ``max_recovery_attempts``; the object in ``worker_object`` allows 50."""


def test_little_worker_recovers_a_run_as_often_as_the_worker_object_allows(procs: Procs) -> None:
    """A run cut more often than the default bound allows is driven, not blocked: the object allows 50."""
    durable.start_workflow(worker_object.job, 1, world=procs.world, queue=worker_object.jobs, run_id="cut")
    dead_pid = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_pid.wait()
    ctl = control_of(procs.world)
    for _ in range(DEFAULT_RECOVERIES + 1):  # each drive begun by a worker that then died
        ctl.adopt("cut", "job", owner="gone", pid=dead_pid.pid, host=HOST, now=time.time() - 3600)
    p = subprocess.Popen(
        [sys.executable, "-m", "durable.cli", "worker", WORKER_OBJECT, *procs.cli_args()],
        cwd=ROOT,
        env=procs.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    procs.procs.append(p)
    assert p.stdout is not None
    serving = p.stdout.readline()
    st = procs.ends("cut", 60)
    assert (st.status, st.reason) == ("completed", None)
    assert serving.startswith("little worker configured-worker: workflows job, tick; queues jobs")
