"""Workflows and queues for the runtime's process tests; run as a program to start runs.

Bodies append JSON lines to ``$DURABLE_TEST_DIR/bodies.jsonl`` (fsynced) with
their own timestamps, so the test measures overlap from the bodies' clocks.

Usage:
    python -m tests.helpers.procs.runtime_app DATA_DIR background RUN_ID
        starts ``two_steps`` in the background of this process and waits forever
        (the test SIGKILLs it once the first step is committed).
    python -m tests.helpers.procs.runtime_app DATA_DIR cancel RUN_ID
        cancels the run from this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import durable

work = durable.Queue("work", concurrency=2)
parts = durable.Queue("parts", partition_concurrency=1)
limited = durable.Queue("limited", rate_limit=(3, 1.0))
plain = durable.Queue("plain")


def note(**fields: object) -> None:
    path = Path(os.environ["DURABLE_TEST_DIR"]) / "bodies.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "t": time.time(), **fields}) + "\n")
        f.flush()
        os.fsync(f.fileno())


@durable.step
async def first(x: int) -> int:
    note(body="first", x=x)
    return x + 1


@durable.step
async def second(x: int) -> int:
    note(body="second", x=x)
    return x * 10


@durable.workflow
async def two_steps(x: int) -> int:
    a = await first(x)
    await durable.sleep(float(os.environ.get("DURABLE_TEST_PAUSE", "0.5")))
    return await second(a)


@durable.step
async def hold(key: str) -> str:
    note(body="hold", key=key, phase="start")
    await asyncio.sleep(float(os.environ.get("DURABLE_TEST_HOLD", "0.15")))
    note(body="hold", key=key, phase="end")
    return key


@durable.workflow
async def held(key: str) -> str:
    return await hold(key)


@durable.step
async def tick(i: int) -> int:
    note(body="tick", i=i)
    return i


@durable.workflow
async def forever(n: int) -> int:
    i = 0
    while True:
        await durable.sleep(0.02)
        i += 1
        if i > 100_000:
            return n


@durable.step
async def trivial_step(x: int) -> int:
    return x


@durable.workflow
async def trivial(x: int) -> int:
    return x


WORKFLOWS = [two_steps, held, forever, trivial]
worker = durable.Worker(
    durable.memory_world(), workflows=WORKFLOWS, queues=[work, parts, limited, plain], concurrency=10
)


async def _background(data: str, run_id: str) -> None:
    world = durable.local_world(data)
    durable.start_workflow(two_steps, 1, world=world, run_id=run_id)
    print("started", flush=True)
    await asyncio.sleep(3600)


async def _cancel(data: str, run_id: str) -> None:
    world = durable.local_world(data)
    await durable.handle(run_id, world=world).cancel()
    print("cancelled", flush=True)


if __name__ == "__main__":
    data_dir, mode, rid = sys.argv[1], sys.argv[2], sys.argv[3]
    asyncio.run(_background(data_dir, rid) if mode == "background" else _cancel(data_dir, rid))
