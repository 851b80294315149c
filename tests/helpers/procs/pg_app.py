"""A worker process on a Postgres world, for the takeover, fencing and restart tests.

Usage:
    python -m tests.helpers.procs.pg_app
        serves the ``pg`` and ``pg-limited`` queues until SIGTERM, with the world from the environment:
        ``DURABLE_TEST_PG_DSN``, ``DURABLE_TEST_SCHEMA``, ``DURABLE_TEST_LEASE`` (seconds),
        ``DURABLE_TEST_CONCURRENCY`` (runs driven at once, default 10).

Step bodies append JSON lines (fsynced) to ``$DURABLE_TEST_DIR/bodies.jsonl``;
``slow`` sleeps ``DURABLE_TEST_HOLD`` seconds in its body, so a test can kill,
pause or cut off the worker while a step is in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import durable

queue = durable.Queue("pg")
limited = durable.Queue("pg-limited", concurrency=2)


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
async def slow(x: int) -> int:
    note(body="slow", x=x, phase="start")
    await asyncio.sleep(float(os.environ.get("DURABLE_TEST_HOLD", "0")))
    note(body="slow", x=x, phase="end")
    return x * 10


@durable.step
async def last(x: int) -> int:
    note(body="last", x=x)
    return x + 3


@durable.workflow
async def three_steps(x: int) -> int:
    return await last(await slow(await first(x)))


@durable.step
async def numbered(i: int) -> int:
    note(body="numbered", i=i)
    await asyncio.sleep(float(os.environ.get("DURABLE_TEST_HOLD", "0")))
    return i


@durable.workflow
async def many_steps(n: int) -> int:
    total = 0
    for i in range(n):
        async with durable.branch(str(i)):
            total += await numbered(i)
    return total


@durable.workflow
async def forever(n: int) -> int:
    for _ in range(1_000_000):
        await durable.sleep(0.02)
    return n


WORKFLOWS = [three_steps, many_steps, forever]


def open_world() -> durable.World:
    return durable.postgres_world(
        os.environ["DURABLE_TEST_PG_DSN"],
        schema=os.environ["DURABLE_TEST_SCHEMA"],
        lease=float(os.environ.get("DURABLE_TEST_LEASE", "10")),
        reconnect_timeout=float(os.environ.get("DURABLE_TEST_RECONNECT", "10")),
        max_size=4,
    )


async def serve() -> None:
    world = open_world()
    concurrency = int(os.environ.get("DURABLE_TEST_CONCURRENCY", "10"))
    worker = durable.Worker(world, workflows=WORKFLOWS, queues=[queue, limited], concurrency=concurrency)
    print(f"serving {worker.name}", flush=True)
    try:
        await worker.run()
    finally:
        world.close()


if __name__ == "__main__":
    asyncio.run(serve())
