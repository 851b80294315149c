"""Real crashes: a child process is SIGKILLed mid-run and a new process resumes it."""

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
EXPECTED = 3 * 2 * 7  # three candidates "c0".."c2", each scored len * 7


def spawn(data: Path, run_id: str, kill_in: str = "", pause: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.procs.multistep", str(data), run_id, kill_in, str(pause)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def bodies(data: Path) -> Counter[str]:
    path = data / "bodies.log"
    return Counter(path.read_text().split() if path.exists() else [])


@pytest.mark.parametrize("kill_in", ["prepare", "review-c1", "tool-c2", "total"])
def test_sigkill_then_resume_in_new_process(tmp_path: Path, kill_in: str) -> None:
    """Killed inside a body, resumed in a new process: same output, no committed body ran twice."""
    proc = spawn(tmp_path, "r", kill_in)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    before = bodies(tmp_path)
    with durable.local_world(tmp_path) as world:
        rows = world.log.read("r")
    committed = [json.loads(d)["path"] for _, t, d in rows if t == "step.completed"]
    confirmed = [json.loads(d)["key"] for _, t, d in rows if t == "effect.receipt"]
    proc = spawn(tmp_path, "r")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["output"] == EXPECTED
    after = bodies(tmp_path)
    for path in committed:  # a committed step's body never runs again
        name = "review-" + path.split("[")[1].split("]")[0] if path.startswith("review[") else path
        assert after[name] == before[name] == 1, (path, before, after)
    for key in confirmed:  # a confirmed tool call is never made again
        name = "tool-" + key.split("[")[1].split("]")[0]
        assert after[name] == before[name] == 1, (key, before, after)
    assert set(after) == {
        "prepare",
        "review-c0",
        "review-c1",
        "review-c2",
        "tool-c0",
        "tool-c1",
        "tool-c2",
        "total",
    }
    assert kill_in not in before and after[kill_in] == 1
    with durable.local_world(tmp_path) as world:
        assert world.log.integrity_check() == "ok"


def test_uninterrupted_run_matches(tmp_path: Path) -> None:
    """The same workflow without a kill gives the output the resumed runs give."""
    proc = spawn(tmp_path, "r")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["output"] == EXPECTED


def test_two_processes_same_run_id_one_drives(tmp_path: Path) -> None:
    """Two processes started together on one run id return the same output; each body runs once."""
    first = spawn(tmp_path, "r", pause=0.05)
    second = spawn(tmp_path, "r", pause=0.05)
    out1, err1 = first.communicate(timeout=60)
    out2, err2 = second.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert json.loads(out1) == json.loads(out2) == {"output": EXPECTED}
    assert set(bodies(tmp_path).values()) == {1}


def test_lock_of_killed_process_is_recovered(tmp_path: Path) -> None:
    """A driver killed while holding the run lock does not block the next one."""
    proc = spawn(tmp_path, "r", "total")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    proc = spawn(tmp_path, "r")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
