"""Agent crash scenarios: SIGKILL a real agent process at each place, resume in a new one."""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import durable
from durable.engine._recorded import Recorded

ROOT = Path(__file__).resolve().parents[2]
ALL_BODIES = {
    "model-0",
    "lookup-ada",
    "model-1",
    "fetch-cv_ada",
    "fetch-refs_ada",
    "stream-2",
    "child-ada-skills",
    "child-ada-references",
    "model-3",
}


def spawn(data: Path, stop_at: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.procs.agent", str(data), "r", stop_at],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_when_stopped(proc: subprocess.Popen[str], name: str) -> None:
    """Wait for the child to report the stop point, then SIGKILL it."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=60), "the agent never reached its stop point"
    line = proc.stdout.readline()
    assert line.strip() == f"STOPPED {name}", line + (proc.stderr.read() if proc.stderr else "")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)  # reaps the child and closes its pipes
    assert proc.returncode == -signal.SIGKILL


def bodies(data: Path) -> Counter[str]:
    words = (data / "bodies.log").read_text().split()
    return Counter(w for w in words if not w.startswith("stopped:"))


def recorded(data: Path) -> Recorded:
    with durable.local_world(data) as world:
        return Recorded.from_rows(world.log.read("r"))


def kill_and_resume(
    data: Path, stop_at: str, check_killed: Callable[[Recorded], None] | None = None
) -> tuple[Counter[str], Counter[str]]:
    """Kill the agent at ``stop_at``, resume it in a new process; body counts before and after."""
    kill_when_stopped(spawn(data, stop_at), stop_at)
    before = bodies(data)
    if check_killed is not None:
        check_killed(recorded(data))
    proc = spawn(data)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"output": "hire ada"}
    return before, bodies(data)


def once_except(after: Counter[str], reissued: set[str]) -> None:
    """Every body ran exactly once, except the ones in flight at the kill, which ran twice."""
    assert set(after) == ALL_BODIES
    assert {k for k, v in after.items() if v != 1} == reissued
    assert all(after[k] == 2 for k in reissued)


@pytest.mark.slow
def test_kill_during_a_model_call(tmp_path: Path) -> None:
    """A model call cut by the kill is issued again; the committed lookup and turn 0 are not."""
    before, after = kill_and_resume(tmp_path, "model-1")
    assert set(before) == {"model-0", "lookup-ada", "model-1"}
    once_except(after, {"model-1"})


@pytest.mark.slow
def test_kill_during_a_tool_call(tmp_path: Path) -> None:
    """An idempotent tool cut by the kill is re-driven; the model turn before it replays."""
    before, after = kill_and_resume(tmp_path, "lookup-ada")
    assert set(before) == {"model-0", "lookup-ada"}
    once_except(after, {"lookup-ada"})


@pytest.mark.slow
def test_kill_between_model_and_tool_calls(tmp_path: Path) -> None:
    """Killed after a model turn committed and before its tools started: nothing runs twice."""
    before, after = kill_and_resume(tmp_path, "between-1")
    assert set(before) == {"model-0", "lookup-ada", "model-1"}
    once_except(after, set())


@pytest.mark.slow
def test_kill_during_a_parallel_tool_batch(tmp_path: Path) -> None:
    """In a batch keyed by tool_call_id, the finished call replays and only the cut one reruns."""

    def first_of_batch_confirmed(rec: Recorded) -> None:
        assert "session:orchestrator#0.[call_1a].tool:fetch#0" in rec.receipts
        assert "session:orchestrator#0.[call_1b].tool:fetch#0" not in rec.receipts

    before, after = kill_and_resume(tmp_path, "fetch-refs_ada", first_of_batch_confirmed)
    assert before["fetch-cv_ada"] == 1
    once_except(after, {"fetch-refs_ada"})


@pytest.mark.slow
def test_kill_during_a_streamed_response(tmp_path: Path) -> None:
    """A stream cut after some chunks were recorded is reissued from its start."""

    def cut_mid_stream(rec: Recorded) -> None:
        cursor = rec.streams["session:orchestrator#0.model:chat_stream#2"]
        assert cursor["chunks"] > 0
        assert not cursor["terminal"]

    before, after = kill_and_resume(tmp_path, "stream-2", cut_mid_stream)
    assert before["stream-2"] == 1
    once_except(after, {"stream-2"})


@pytest.mark.slow
def test_kill_inside_a_child_workflow(tmp_path: Path) -> None:
    """A kill inside the child run recovers at the child's level; the parent's calls replay."""

    def parent_waits_on_child(rec: Recorded) -> None:
        key = "session:orchestrator#0.[call_2].workflow:scoring#0"
        assert rec.intents[key]["child_run_id"] == f"r:{key}"
        assert key not in rec.receipts

    before, after = kill_and_resume(tmp_path, "child-ada-references", parent_waits_on_child)
    assert before["child-ada-skills"] == 1
    once_except(after, {"child-ada-references"})
    with durable.local_world(tmp_path) as world:
        child = [r for r in world.runs() if r.parent_run_id == "r"]
    assert [(c.workflow, c.status) for c in child] == [("scoring", "completed")]
