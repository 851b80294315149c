"""A workflow module started as a script (``python app.py DATA``) and resumed by other programs.

``APP_KILL=charge`` SIGKILLs the process inside the ``charge`` step, after
``reserve`` and the child workflow ``receipt`` committed. ``APP_MARKS`` names
a file each body appends its name to, to count the bodies that ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import durable


def _mark(name: str) -> None:
    marks = os.environ.get("APP_MARKS")
    if marks:
        with open(marks, "a") as f:
            f.write(name + "\n")


@durable.step
async def reserve(sku: str) -> int:
    _mark("reserve")
    return len(sku)


@durable.workflow
async def receipt(n: int) -> str:
    _mark("receipt")
    return f"receipt for {n} items"


@durable.step
async def charge(n: int) -> int:
    _mark("charge")
    if os.environ.get("APP_KILL") == "charge":
        os.kill(os.getpid(), signal.SIGKILL)
    return n * 100


@durable.workflow
async def checkout(sku: str) -> dict[str, str | int]:
    n = await reserve(sku)
    text = await receipt(n)
    total = await charge(n)
    return {"total": total, "receipt": text}


if __name__ == "__main__":
    world = durable.local_world(sys.argv[1])
    out = asyncio.run(durable.run_workflow(checkout, "sku-1", world=world, run_id="r"))
    print(json.dumps(out))
