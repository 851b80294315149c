"""A process SIGKILLed inside the compaction transaction leaves a log that recovers to the same state."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durable
from tests.engine.test_compaction_property import index

ROOT = Path(__file__).resolve().parents[2]


def child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.procs.compaction", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("statement", ["INSERT INTO events", "DELETE FROM events", "COMMIT"])
def test_kill_during_compaction_keeps_the_state_and_the_resume(tmp_path: Path, statement: str) -> None:
    """SIGKILL at any statement of the compaction leaves the same state; a new process resumes it."""
    data, calls = str(tmp_path / "data"), tmp_path / "calls.txt"
    killed = child("run", data, "r1", str(calls), "3")
    assert killed.returncode == -signal.SIGKILL
    assert calls.read_text().split("\n")[:-1] == ["work 0", "work 1", "work 2"]
    with durable.local_world(data) as world:
        before_events = world.events("r1")
        before = index(durable.recover("r1", world=world))

    crashed = child("compact", data, "r1", statement)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr

    with durable.local_world(data) as world:
        assert world.log.integrity_check() == "ok"
        assert index(durable.recover("r1", world=world)) == before
        assert world.events("r1") == before_events
    calls.write_text("")
    resumed = child("run", data, "r1", str(calls))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == str(sum(i * i for i in range(5)))
    assert calls.read_text().split("\n")[:-1] == ["work 3", "work 4"]


@pytest.mark.slow
def test_completed_compaction_in_another_process_resumes_the_same(tmp_path: Path) -> None:
    """A compaction that committed in a child process leaves one snapshot, and a resume runs only the rest."""
    data, calls = str(tmp_path / "data"), tmp_path / "calls.txt"
    child("run", data, "r1", str(calls), "2")
    with durable.local_world(data) as world:
        before = index(durable.recover("r1", world=world))
    done = child("compact", data, "r1", "no statement starts like this")
    assert done.returncode == 0, done.stderr
    with durable.local_world(data) as world:
        assert [e.type for e in world.events("r1")] == ["snapshot"]
        assert index(durable.recover("r1", world=world)) == before
    calls.write_text("")
    resumed = child("run", data, "r1", str(calls))
    assert resumed.stdout.strip() == "30"
    assert calls.read_text().split("\n")[:-1] == ["work 2", "work 3", "work 4"]
