"""A child-process workflow: a plain tool, then synchronous work in its caller.

Usage: python -m tests.helpers.procs.plain_tool DATA_DIR RUN_ID KILL|run [DURABILITY]

The tool appends to ``DATA_DIR/bodies.log`` (fsynced) each time its body
runs. With KILL set, the step that called it SIGKILLs its own process right
after the tool returned, before anything else is awaited: the moment a
receipt still in the write buffer would be lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import durable

DATA = Path(sys.argv[1])
RUN_ID = sys.argv[2]
KILL = sys.argv[3] == "kill" if len(sys.argv) > 3 else False
DURABILITY = sys.argv[4] if len(sys.argv) > 4 else "process"


def _note(name: str) -> None:
    with open(DATA / "bodies.log", "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


@durable.tool
async def charge(amount: int) -> str:
    _note("charge")
    return f"charged {amount}"


@durable.step
async def checkout(amount: int) -> str:
    receipt = await charge(amount)
    if KILL:  # synchronous work after the tool returned: no await in between
        os.kill(os.getpid(), signal.SIGKILL)
    return receipt


@durable.workflow
async def pay(amount: int) -> str:
    return await checkout(amount)


if __name__ == "__main__":
    with durable.local_world(DATA, durability=DURABILITY) as world:  # type: ignore[arg-type]
        out = asyncio.run(durable.run_workflow(pay, 5, world=world, run_id=RUN_ID))
    print(json.dumps({"output": out}))
