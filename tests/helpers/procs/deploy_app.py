"""Workflows in two versions of their code, served by worker processes of either (deploy tests).

``DURABLE_TEST_CODE=new`` is the new code, anything else the old. What the new code changes:

- ``rollout``: the step ``prepare`` has another signature (a used step's signature changed);
- ``mixed``: the step ``settle`` renamed its parameter: drift for a run that used it, none for
  a run that had not reached it (which the new code then continues);
- ``approval``: a step ``review`` is called before the interrupt (a call inserted: a replay of
  an old run that went past that point diverges);
- ``shipping``: the tool ``ship`` renamed its parameter (its recorded calls still bind);
  ``labelling``: the tool ``label`` gained a parameter without a default (they do not);
- ``rolling`` (the rolling-deploy torture): ``audit`` is inserted after ``prep``, ``prep``
  gained a parameter with a default, and ``fin`` renamed its parameter.

Each body appends a line to ``$DURABLE_TEST_DIR/bodies.jsonl`` (step, input, code, pid). The
step ``hold`` waits until ``$DURABLE_TEST_DIR/gate-<x>`` exists, so a test holds a run in
flight. The world is a Postgres one when ``DURABLE_TEST_PG_DSN`` and ``DURABLE_TEST_SCHEMA``
are set, else the data directory ``$DURABLE_TEST_DIR/data``.

Usage:
    python -m tests.helpers.procs.deploy_app
        serves the queues named in ``$DURABLE_TEST_QUEUES`` (comma-separated, ``deploy`` by
        default; empty: recovery only), prints ``serving`` once it does, until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random

import durable
from tests.helpers.procs.unhappy_app import here, note, open_world

CODE = os.environ.get("DURABLE_TEST_CODE", "old")
"""Which version of the code this process runs: ``old`` or ``new``."""

NEW = CODE == "new"

deploy = durable.Queue("deploy", concurrency=2)
rolling_queue = durable.Queue("rolling")


if NEW:

    @durable.step
    async def prepare(value: int) -> int:  # a renamed parameter: drift (a new defaulted one is not)
        note(step="prepare", x=value, code=CODE)
        return value

else:

    @durable.step
    async def prepare(x: int) -> int:
        note(step="prepare", x=x, code=CODE)
        return x


@durable.step(max_visits=3)
async def hold(x: int | str) -> int | str:
    while not (isinstance(x, int) and x >= 100) and not (here() / f"gate-{x}").exists():  # noqa: ASYNC110  (another process opens it)
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


# -- mixed: a run that the new code continues ---------------------------------------------


@durable.step
async def begin(x: int) -> int:
    note(step="begin", x=x, code=CODE)
    return x


if NEW:

    @durable.step
    async def settle(value: int) -> int:
        note(step="settle", x=value, code=CODE)
        return value + 1

else:

    @durable.step
    async def settle(x: int) -> int:
        note(step="settle", x=x, code=CODE)
        return x + 1


@durable.workflow
async def mixed(x: int) -> int:
    await begin(x)
    await hold(f"{x}a")
    b = await settle(x)
    await hold(f"{x}b")
    return b


# -- approval: a call inserted before an interrupt -----------------------------------------


@durable.step
async def draft(x: int) -> int:
    note(step="draft", x=x, code=CODE)
    return x


if NEW:  # a new step: the new code's manifest differs, so a worker can tell the two versions apart

    @durable.step
    async def review(x: int) -> int:
        note(step="review", x=x, code=CODE)
        return x


@durable.step
async def publish(x: int, answer: str) -> str:
    note(step="publish", x=x, code=CODE)
    return f"{x}:{answer}"


@durable.workflow
async def approval(x: int) -> str:
    d = await draft(x)
    if NEW:
        d = await review(d)  # inserted before the interrupt
    answer = durable.interrupt("publish?")
    return await publish(d, str(answer))


# -- shipping and labelling: a tool's signature drift, accepted ---------------------------

if NEW:

    @durable.tool
    async def ship(oid: str) -> str:
        note(tool="ship", x=oid, code=CODE)
        return f"shipped {oid}"

    @durable.tool
    async def label(order_id: str, copies: int) -> str:
        note(tool="label", x=order_id, code=CODE)
        return f"labelled {order_id}"

else:

    @durable.tool
    async def ship(order_id: str) -> str:
        note(tool="ship", x=order_id, code=CODE)
        return f"shipped {order_id}"

    @durable.tool
    async def label(order_id: str) -> str:
        note(tool="label", x=order_id, code=CODE)
        return f"labelled {order_id}"


@durable.workflow
async def shipping(x: int) -> str:
    shipped = await ship(f"order-{x}")
    await hold(f"ship{x}")
    return shipped


@durable.workflow
async def labelling(x: int) -> str:
    labelled = await (label(f"order-{x}", 1) if NEW else label(f"order-{x}"))
    await hold(f"label{x}")
    return labelled


# -- rolling: every kind of change at once, for the rolling-deploy torture -----------------


async def _busy() -> None:
    await asyncio.sleep(random.uniform(0.05, 0.15))  # a window for a kill


if NEW:

    @durable.step
    async def prep(x: int, strict: bool = False) -> int:  # compatible: old calls still bind
        await _busy()
        return x

    @durable.step
    async def fin(total: int) -> int:  # drift for a run that used it
        await _busy()
        note(step="fin", x=total, code=CODE)
        return total * 10

else:

    @durable.step
    async def prep(x: int) -> int:
        await _busy()
        return x

    @durable.step
    async def fin(x: int) -> int:
        await _busy()
        note(step="fin", x=x, code=CODE)
        return x * 10


@durable.step
async def audit(x: int) -> int:
    await _busy()
    return x


TICKS = 5


@durable.step(max_visits=TICKS + 1)
async def tick(x: int) -> int:
    await _busy()
    return x + 1


@durable.workflow
async def rolling(x: int) -> int:
    a = await prep(x)
    if NEW:
        a = await audit(a)  # inserted: an old run past prep diverges under this code
    for _ in range(TICKS):
        a = await tick(a)
    b = await fin(a)
    return await tick(b)  # (x + TICKS) * 10 + 1, whichever code made which call


WORKFLOWS = [rollout, mixed, approval, shipping, labelling, rolling]


async def serve() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    world = open_world()
    if os.environ.get("DURABLE_TEST_REGISTER_ONLY"):
        # A worker of this code as the others see it (registered, its lock held) that drives nothing:
        # a worker that is alive when a run is left to it and dies before it takes the run.
        from durable.engine import workflow_spec
        from durable.runtime._live_workers import register

        register(world, f"{CODE}-{os.getpid()}", [workflow_spec(w) for w in WORKFLOWS])
        print("serving", flush=True)
        await asyncio.Event().wait()
    named = os.environ.get("DURABLE_TEST_QUEUES", "deploy")
    queues = [q for q in (deploy, rolling_queue) if q.name in named.split(",")]
    worker = durable.Worker(
        world, workflows=WORKFLOWS, queues=queues, name=f"{CODE}-{os.getpid()}", max_recovery_attempts=100
    )
    await worker.start()
    print("serving", flush=True)
    try:
        await worker.run()
    finally:
        world.close()


if __name__ == "__main__":
    asyncio.run(serve())
