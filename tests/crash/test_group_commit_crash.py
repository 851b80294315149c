"""Runs whose commits are grouped, SIGKILLed in a real child process and resumed in a new one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import durable

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5


def spawn(data: Path, kill_at: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.procs.grouped", str(data), str(RUNS), str(kill_at)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bodies(data: Path) -> Counter[str]:
    path = data / "bodies.log"
    return Counter(path.read_text().split() if path.exists() else [])


def committed(data: Path) -> set[str]:
    """``<run>:<step>`` of every step completion the log holds."""
    with durable.local_world(data) as world:
        found = set()
        for k in range(RUNS):
            for _, type_, raw in world.log.read(f"g{k}"):
                if type_ == "step.completed":
                    found.add(f"g{k}:{json.loads(raw)['visit']}")
        return found


def test_runs_driven_together_share_transactions(tmp_path: Path) -> None:
    """Uninterrupted, the five runs commit their 25 appends in far fewer transactions."""
    done = spawn(tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["outputs"] == [30] * RUNS
    assert 0 < out["transactions"] < 10
    assert bodies(tmp_path) == Counter({f"g{k}:{i}": 1 for k in range(RUNS) for i in range(3)})


@pytest.mark.parametrize("kill_at", [2, 7, 11, 15])
def test_sigkill_between_grouped_commits_then_resume(tmp_path: Path, kill_at: int) -> None:
    """Killed while other runs' commits wait for the group: a committed step never runs again."""
    killed = spawn(tmp_path, kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = bodies(tmp_path)
    kept = committed(tmp_path)
    assert kept <= set(before)  # nothing is committed that did not run
    assert len(before) == kill_at - 1
    if kill_at >= 11:  # some runs' steps had run, their commits waiting for the group
        assert kept < set(before)
    done = spawn(tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"] == [30] * RUNS
    after = bodies(tmp_path)
    for name in kept:
        assert after[name] == 1, (name, before, after)
    assert set(after) == {f"g{k}:{i}" for k in range(RUNS) for i in range(3)}
    with durable.local_world(tmp_path) as world:
        assert world.log.integrity_check() == "ok"
