"""Across processes: run, SIGKILL, change the code, resume in a new process → drift, nothing runs."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

APP = """
import asyncio
import os
import sys
from pathlib import Path

import durable

MARKS = Path(os.environ["MARKS"])


def mark(text):
    with MARKS.open("a") as f:
        f.write(text + "\\n")


@durable.tool
async def score(candidate_id: str) -> int:
    mark(f"score {candidate_id}")
    return len(candidate_id)


@durable.step
async def wait_here(total: int) -> int:
    mark("wait")
    await asyncio.sleep(0)  # one event-loop turn: the engine makes the last receipt durable then
    print("READY", flush=True)
    # Waits until the test kills the process (a resume gets no stdin and goes on at once).
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return total


@durable.workflow
async def flow(names: list[str]) -> int:
    total = 0
    for name in names:
        total += await score(name)
    return await wait_here(total)


if __name__ == "__main__":
    world = durable.local_world(sys.argv[1])
    try:
        out = asyncio.run(durable.run_workflow(flow, ["ada", "grace"], world=world, run_id="run_x"))
    except durable.CapabilityDriftError as exc:
        print("DRIFT", ",".join(c.key for c in exc.changes), flush=True)
        sys.exit(3)
    print("OUTPUT", out, flush=True)
"""

ORIGINAL = "async def score(candidate_id: str) -> int:"
CHANGED = "async def score(candidate_id: str, strict: bool = False) -> int:"


def _start_and_kill(app: Path, data: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(app), str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the child never reached its waiting step"
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL


def _resume(app: Path, data: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(app), str(data)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_code_changed_after_a_kill_is_refused_in_a_new_process(tmp_path: Path) -> None:
    """A run killed with SIGKILL, resumed by another process with changed code, fails closed."""
    app = tmp_path / "crash_app.py"
    app.write_text(APP)
    data = tmp_path / "data"
    marks = tmp_path / "marks.txt"
    env = {**os.environ, "MARKS": str(marks)}
    _start_and_kill(app, data, env)
    assert marks.read_text().splitlines() == ["score ada", "score grace", "wait"]

    app.write_text(APP.replace(ORIGINAL, CHANGED))
    refused = _resume(app, data, env)
    assert refused.returncode == 3, refused.stderr
    assert refused.stdout.strip() == "DRIFT tools.score.signature"
    assert marks.read_text().splitlines() == ["score ada", "score grace", "wait"]

    app.write_text(APP)
    resumed = _resume(app, data, env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines() == ["READY", "OUTPUT 8"]
    assert marks.read_text().splitlines() == ["score ada", "score grace", "wait", "wait"]
