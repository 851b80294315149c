"""Kill a run with SIGKILL and resume it in a new process.

A workflow fans out two branches, ``fast-a`` and ``slow-b``; each scores its
candidate through a tool that appends a heartbeat line per call. This script
starts the workflow in a child process, waits until ``fast-a`` has committed,
kills the child with SIGKILL while ``slow-b`` is still scoring, then starts a
fresh process on the same ``run_id`` and data directory. The heartbeats prove
that ``fast-a`` was not scored again: its committed output came from the log.

Run it:

    python cookbook/kill_resume.py

Then look at the log yourself:

    little runs --data-dir <the data directory it prints>
    little replay run_candidate_review --data-dir <the data directory it prints>
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

import durable

RUN_ID = "run_candidate_review"


class Candidate(BaseModel):
    id: str
    score: int


class ReviewInput(BaseModel):
    candidates: list[Candidate]


class Review(BaseModel):
    id: str
    score: int


def heartbeat(data_dir: Path, candidate_id: str) -> None:
    """Append one line per real tool call; fsync so the line survives the kill."""
    with open(data_dir / "heartbeats.log", "a") as f:
        f.write(candidate_id + "\n")
        f.flush()
        os.fsync(f.fileno())


@durable.tool(idempotent=True)
async def score(candidate_id: str, base: int) -> int:
    """The external call: slow for slow-b on the first attempt, so the kill lands mid-flight."""
    heartbeat(Path(os.environ["DEMO_DATA_DIR"]), candidate_id)
    if candidate_id.startswith("slow"):
        await asyncio.sleep(float(os.environ.get("DEMO_SLOW_SECONDS", "0")))
    return base * 10


@durable.step
async def worker(c: Candidate) -> Review:
    return Review(id=c.id, score=await score(c.id, c.score))


@durable.workflow
async def review_candidates(inp: ReviewInput) -> list[Review]:
    return await durable.parallel("review-candidates", inp.candidates, worker, key=lambda c: c.id)


INPUT = ReviewInput(candidates=[Candidate(id="fast-a", score=1), Candidate(id="slow-b", score=2)])


def child(data_dir: Path) -> None:
    """Run (or resume) the workflow and print its output."""
    with durable.local_world(data_dir) as world:
        out = asyncio.run(durable.run_workflow(review_candidates, INPUT, world=world, run_id=RUN_ID))
    print("child finished:", [r.model_dump() for r in out])


def spawn(data_dir: Path, slow_seconds: float) -> subprocess.Popen[bytes]:
    env = dict(os.environ, DEMO_DATA_DIR=str(data_dir), DEMO_SLOW_SECONDS=str(slow_seconds))
    return subprocess.Popen([sys.executable, __file__, "--child", str(data_dir)], env=env)


def fast_a_committed(data_dir: Path) -> bool:
    if not (data_dir / "events.db").exists():
        return False
    with durable.local_world(data_dir) as world:
        try:
            events = world.events(RUN_ID)
        except durable.RunNotFoundError:
            return False
    return any(e.type == "step.completed" and e.path == "review-candidates[fast-a].worker" for e in events)  # type: ignore[union-attr]


def beats(data_dir: Path) -> dict[str, int]:
    path = data_dir / "heartbeats.log"
    lines = path.read_text().split() if path.exists() else []
    return {cid: lines.count(cid) for cid in ("fast-a", "slow-b")}


def main() -> int:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="little-demo-"))
    print(f"data directory: {data_dir}")

    print("1. starting the workflow in a child process ...")
    proc = spawn(data_dir, slow_seconds=60)
    deadline = time.monotonic() + 30
    while not fast_a_committed(data_dir):
        if proc.poll() is not None or time.monotonic() > deadline:
            print("the child ended before fast-a committed; something is wrong")
            return 1
        time.sleep(0.02)
    before = beats(data_dir)
    print(f"2. fast-a committed; slow-b is still scoring. Heartbeats so far: {before}")

    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"3. killed the child with SIGKILL (exit status {proc.returncode})")

    print("4. resuming the same run id in a fresh process ...")
    proc = spawn(data_dir, slow_seconds=0)
    if proc.wait(timeout=60) != 0:
        print("the resumed run failed")
        return 1
    after = beats(data_dir)
    print(f"5. heartbeats after the resume: {after}")

    if after["fast-a"] != before["fast-a"]:
        print("FAIL: fast-a was scored again after the resume")
        return 1
    print(
        "fast-a was NOT scored again: its committed output was replayed from the log.\n"
        f"slow-b was scored {after['slow-b']} times: once when the kill cut it off, "
        "once on resume with the same idempotency key (the tool is idempotent=True)."
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]))
    else:
        sys.exit(main())
