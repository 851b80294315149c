"""Runs that ``run_workflow`` drives in the calling process, for tests that cut or SIGKILL that process.

The world is the unhappy app's (``$DURABLE_TEST_DIR/data``, or Postgres with
``DURABLE_TEST_PG_DSN`` and ``DURABLE_TEST_SCHEMA``), and the bodies note
themselves in ``$DURABLE_TEST_DIR/bodies.jsonl``. Each call below waits until
the file ``go`` exists, so a test kills the process while it is in flight;
with ``CUT["armed"]`` the tools raise ``KeyboardInterrupt`` instead, as their
process dying would (for tests that stay in one process).

Usage:
    python -m tests.helpers.procs.run_here WORKFLOW JSON_INPUT RUN_ID
        drives the run with ``run_workflow`` until it ends.
"""

from __future__ import annotations

import asyncio
import json
import sys

import durable
from tests.helpers.procs.unhappy_app import here, note, open_world

CUT = {"armed": False}


async def _until_go() -> None:
    if CUT["armed"]:
        raise KeyboardInterrupt  # stands for the driver dying inside the call
    while not (here() / "go").exists():  # noqa: ASYNC110  (another process makes the file)
        await asyncio.sleep(0.02)


@durable.tool
async def charge(cents: int) -> str:
    """A plain tool that returns a value."""
    note(tool="charge", key=durable.idempotency_key())
    await _until_go()
    return f"charged {cents}"


@durable.tool
async def notify(who: str) -> None:
    """A plain tool that returns None."""
    note(tool="notify", key=durable.idempotency_key())
    await _until_go()


@durable.step
async def think(x: int) -> int:
    note(step="think", x=x)
    await _until_go()
    return x


@durable.workflow
async def paying(cents: int) -> str:
    return f"done: {await charge(cents)}"


@durable.workflow
async def notifying(who: str) -> str:
    await notify(who)
    return f"told {who}"


@durable.workflow
async def thinking(x: int) -> int:
    return await think(x) + 1


async def main(name: str, value: str, run_id: str) -> None:
    world = open_world()
    try:
        out = await durable.run_workflow(globals()[name], json.loads(value), world=world, run_id=run_id)
        print(json.dumps(out), flush=True)
    finally:
        world.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
