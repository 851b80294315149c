"""A child-process workflow for crash tests: sequential steps, a fan-out with tools.

Usage: python -m tests.helpers.procs.multistep DATA_DIR RUN_ID [KILL_IN] [PAUSE]

Every step and tool body appends its name to ``DATA_DIR/bodies.log`` (fsynced),
so the parent can count how often each really ran across kills. When the body
named ``KILL_IN`` starts for the first time, the process SIGKILLs itself.
``PAUSE`` seconds are slept in each step body (to make two drivers overlap).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import durable

DATA = Path(sys.argv[1])
RUN_ID = sys.argv[2]
KILL_IN = sys.argv[3] if len(sys.argv) > 3 else ""
PAUSE = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0


def body(name: str) -> None:
    log = DATA / "bodies.log"
    seen = log.read_text().split() if log.exists() else []
    if name == KILL_IN and name not in seen:
        os.kill(os.getpid(), signal.SIGKILL)
    with open(log, "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    if PAUSE:
        time.sleep(PAUSE)


@durable.tool(idempotent=True)
async def score(cid: str) -> int:
    body(f"tool-{cid}")
    await asyncio.sleep(0)
    return len(cid) * 7


@durable.step
async def prepare(n: int) -> list[str]:
    body("prepare")
    return [f"c{i}" for i in range(n)]


@durable.step
async def review(cid: str) -> dict[str, int]:
    body(f"review-{cid}")
    return {cid: await score(cid)}


@durable.step
async def total(parts: list[dict[str, int]]) -> int:
    body("total")
    return sum(v for p in parts for v in p.values())


@durable.workflow
async def pipeline(n: int) -> int:
    cands = await prepare(n)
    parts = await durable.parallel("review", cands, review, key=lambda c: c)
    return await total(parts)


if __name__ == "__main__":
    with durable.local_world(DATA) as world:
        out = asyncio.run(durable.run_workflow(pipeline, 3, world=world, run_id=RUN_ID))
    print(json.dumps({"output": out}))
