"""Loops killed with SIGKILL in a real child process and resumed in a new one (SQLite log on disk)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest

from durable.engine._keys import step_path
from tests.helpers.outer_loop_harness import expected_counts, read_counts

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT = 60


def spawn(mode: str, data_dir: Path, count_file: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.loop_child", mode, str(data_dir), str(count_file), *extra],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def read_until(stream: IO[str] | None, prefix: str) -> str:
    """The first line of ``stream`` that starts with ``prefix`` (fails at end of output)."""
    assert stream is not None
    for line in stream:
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"the child ended without printing {prefix!r}")


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """Let a child run to its end and return its RESULT."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.close()
    out = proc.stdout.read()  # through the same buffer that read_until used
    proc.stdout.close()
    assert proc.wait(timeout=CHILD_TIMEOUT) == 0, out
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    found: dict[str, Any] = json.loads(line[len("RESULT ") :])
    return found


def kill_at(mode: str, data_dir: Path, count_file: Path, point: str, n: int) -> None:
    """Start a child, wait until it reaches ``point`` of ``n``, and SIGKILL it there."""
    proc = spawn(mode, data_dir, count_file, "--pause", point, "--cycle", str(n))
    assert read_until(proc.stdout, "AT ") == f"AT {point} {n}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=CHILD_TIMEOUT)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.close()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The loop run once without any kill."""
    where = tmp_path_factory.mktemp("reference")
    found = finish(spawn("outer", where / "data", where / "counts"))
    assert read_counts(where / "counts") == expected_counts()
    return found


@pytest.mark.parametrize("cycle", [1, 2, 3])
@pytest.mark.parametrize("point", ["before_pending", "mid_cycle", "after_commit", "after_manifest"])
def test_outer_loop_killed_at_each_commit_point_resumes_in_a_new_process(
    tmp_path: Path, reference: dict[str, Any], point: str, cycle: int
) -> None:
    """SIGKILL at a commit point, then a new process: same output, every step and supervise once."""
    data_dir, counts = tmp_path / "data", tmp_path / "counts"
    kill_at("outer", data_dir, counts, point, cycle)
    manifest = json.loads((data_dir / "outer-loops" / "ol_test.json").read_text())
    found = finish(spawn("outer", data_dir, counts))
    assert (found["final_output"], found["ended"]) == (reference["final_output"], reference["ended"])
    assert [c[0] for c in found["cycles"]] == [1, 2, 3]
    assert read_counts(counts) == expected_counts()
    if manifest["pendingCycleRunId"] is not None:
        assert found["cycles"][len(manifest["cycles"])][1] == manifest["pendingCycleRunId"]


def test_two_processes_racing_on_one_outer_loop_run_it_once(tmp_path: Path) -> None:
    """A second process waits for the first, then returns the same result; supervise ran once per cycle."""
    data_dir, counts = tmp_path / "data", tmp_path / "counts"
    first = spawn("outer", data_dir, counts, "--pause", "in_supervise", "--cycle", "1")
    assert read_until(first.stdout, "AT ") == "AT in_supervise 1"
    second = spawn("outer", data_dir, counts, "--report-wait")
    assert read_until(second.stdout, "WAITING") == "WAITING"
    assert first.stdin is not None
    first.stdin.write("go on\n")
    first.stdin.flush()
    a, b = finish(first), finish(second)
    assert a == b
    assert read_counts(counts) == expected_counts()


def test_lock_of_a_killed_driver_is_recovered(tmp_path: Path, reference: dict[str, Any]) -> None:
    """A process killed while it holds the loop's lock leaves nothing to clean up by hand."""
    data_dir, counts = tmp_path / "data", tmp_path / "counts"
    kill_at("outer", data_dir, counts, "in_supervise", 2)
    assert (data_dir / "locks").is_dir()
    assert finish(spawn("outer", data_dir, counts))["final_output"] == reference["final_output"]
    assert read_counts(counts) == expected_counts()


@pytest.mark.parametrize("visit", [0, 1, 2])
def test_decision_loop_killed_during_visit_k_resumes_visit_k(tmp_path: Path, visit: int) -> None:
    """SIGKILL during visit k of a looping step: a new process replays the visits below k and reruns k."""
    data_dir, counts = tmp_path / "data", tmp_path / "counts"
    kill_at("decision", data_dir, counts, "visit", visit)
    found = finish(spawn("decision", data_dir, counts))
    assert found["final_output"] == {"text": "d+++", "round": 3}
    assert found["paths"] == [step_path("", s, k, True) for k in range(3) for s in ("revise", "critique")]
    want: Counter[str] = Counter()
    for k in range(3):
        want.update([f"revise:{k}", f"critique:{k}"])
    assert read_counts(counts) == want
