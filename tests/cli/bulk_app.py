"""A data directory of runs in every status, for `little verify/compact/gc` over many runs."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import durable
from durable.runtime import cancel_run

FINISHED = ["ok-1", "ok-2", "ok-3", "bad", "gone", "family"]
"""Top-level runs that finished: three completed, one failed, one cancelled, a parent with a child."""
WAITING = "waiting"
"""A run that waits for an answer (``interrupted``): not finished."""


@durable.step
async def double(x: int) -> int:
    return 2 * x


@durable.step
async def add(x: int, y: int) -> int:
    return x + y


@durable.workflow
async def sums(x: int) -> int:
    return await add(await double(x), x)


@durable.step
async def explode(x: int) -> int:
    raise ValueError(f"cannot handle {x}")


@durable.workflow
async def failing(x: int) -> int:
    return await explode(x)


@durable.workflow
async def asks(x: int) -> int:
    answer = durable.interrupt({"question": "go on?"})
    return await double(x) if answer == "yes" else 0


@durable.workflow
async def child(x: int) -> int:
    return await double(x)


@durable.workflow
async def parent(x: int) -> int:
    return await child(x) + 1


def seed(data_dir: Path) -> None:
    """Write the runs into ``data_dir`` (a real SQLite data directory)."""

    async def go() -> None:
        world = durable.local_world(data_dir)
        try:
            for i, run_id in enumerate(["ok-1", "ok-2", "ok-3"], 1):
                await durable.run_workflow(sums, i, world=world, run_id=run_id)
            with contextlib.suppress(ValueError):
                await durable.run_workflow(failing, 1, world=world, run_id="bad")
            for run_id in ("gone", WAITING):
                with contextlib.suppress(durable.RunInterrupted):
                    await durable.run_workflow(asks, 1, world=world, run_id=run_id)
            assert cancel_run(world, "gone") == "cancelled"
            await durable.run_workflow(parent, 1, world=world, run_id="family")
        finally:
            world.close()

    asyncio.run(go())
