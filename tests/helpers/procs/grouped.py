"""A child process driving several runs at once, so that their commits are grouped.

Usage: python -m tests.helpers.procs.grouped DATA_DIR RUNS [KILL_AT]

Starts runs ``g0``..``g<RUNS-1>`` together in one world (each three steps, a
step body awaiting once so that the runs interleave) and prints one JSON line:
the outputs and the world's group transactions. Every step body appends
``<run>:<step>`` to ``DATA_DIR/bodies.log`` (fsynced) before it returns; the
body that would be the ``KILL_AT``-th line SIGKILLs the process instead.
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
RUNS = int(sys.argv[2])
KILL_AT = int(sys.argv[3]) if len(sys.argv) > 3 else 0


def body(name: str) -> None:
    log = DATA / "bodies.log"
    seen = log.read_text().split() if log.exists() else []
    if KILL_AT and len(seen) + 1 == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    with open(log, "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


@durable.step(max_visits=3)
async def work(run: str, i: int) -> int:
    await asyncio.sleep(0)  # the other runs go on meanwhile
    body(f"{run}:{i}")
    return i * 10


@durable.workflow
async def grouped(run: str) -> int:
    total = 0
    for i in range(3):
        total += await work(run, i)
    return total


async def main() -> None:
    with durable.local_world(DATA) as world:
        outs = await asyncio.gather(
            *(durable.run_workflow(grouped, f"g{k}", world=world, run_id=f"g{k}") for k in range(RUNS))
        )
        print(json.dumps({"outputs": outs, "transactions": world.commits.transactions}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
