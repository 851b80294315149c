"""One workflow in two versions of its code, served by worker processes of either (deploy tests).

``DURABLE_TEST_CODE=new`` gives the step ``prepare`` another signature (a
used step's signature changed by a deploy); anything else is the old code.
Each step body appends a line to ``$DURABLE_TEST_DIR/bodies.jsonl`` (step,
input, code, pid). The step ``hold`` waits until ``$DURABLE_TEST_DIR/gate-<x>``
exists, so a test holds a run in flight. The world is a Postgres one when
``DURABLE_TEST_PG_DSN`` and ``DURABLE_TEST_SCHEMA`` are set, else the data
directory ``$DURABLE_TEST_DIR/data``.

Usage:
    python -m tests.helpers.procs.deploy_app
        serves the queue ``deploy`` (prints ``serving`` once it does) until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os

import durable
from tests.helpers.procs.unhappy_app import here, note, open_world

CODE = os.environ.get("DURABLE_TEST_CODE", "old")
"""Which version of the code this process runs: ``old`` or ``new``."""

deploy = durable.Queue("deploy", concurrency=2)


if CODE == "new":

    @durable.step
    async def prepare(value: int) -> int:  # a renamed parameter: drift (a new defaulted one is not)
        note(step="prepare", x=value, code=CODE)
        return value

else:

    @durable.step
    async def prepare(x: int) -> int:
        note(step="prepare", x=x, code=CODE)
        return x


@durable.step
async def hold(x: int) -> int:
    while x < 100 and not (here() / f"gate-{x}").exists():  # noqa: ASYNC110  (another process opens it)
        await asyncio.sleep(0.02)
    return x


@durable.step
async def finish(x: int) -> int:
    note(step="finish", x=x, code=CODE)
    return x * 2


@durable.workflow
async def rollout(x: int) -> int:
    a = await prepare(x)
    await hold(a)
    return await finish(a)


async def serve() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    world = open_world()
    worker = durable.Worker(world, workflows=[rollout], queues=[deploy], name=f"{CODE}-{os.getpid()}")
    await worker.start()
    print("serving", flush=True)
    try:
        await worker.run()
    finally:
        world.close()


if __name__ == "__main__":
    asyncio.run(serve())
