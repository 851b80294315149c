"""Workflows for the process tests of messages, events and streams; run as a program to send.

Bodies append JSON lines to ``$DURABLE_TEST_DIR/bodies.jsonl`` (fsynced).

Usage:
    python -m tests.helpers.procs.messages_app DATA_DIR send-and-die RUN_ID TARGET
        runs ``sender`` to TARGET and SIGKILLs itself once the message is stored,
        before the send is recorded in the sender's log.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import durable
from durable.store import Append


def note(**fields: object) -> None:
    path = Path(os.environ["DURABLE_TEST_DIR"]) / "bodies.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "t": time.time(), **fields}) + "\n")
        f.flush()
        os.fsync(f.fileno())


@durable.step(max_visits=1000)
async def handle(m: Any) -> Any:
    note(body="handle", m=m)
    return m


@durable.workflow
async def inbox(n: int) -> list[Any]:
    return [await handle(await durable.recv()) for _ in range(n)]


@durable.workflow
async def ticker(n: int) -> int:
    for i in range(n):
        await durable.recv()
        await durable.write_stream("s", i)
        durable.set_event("progress", i)
    durable.close_stream("s")
    return n


@durable.workflow
async def sender(target: str) -> str:
    await durable.send(target, "hello")
    return "sent"


@durable.tool(outbox=True, retry=durable.RetryPolicy(max_attempts=3, backoff=0))
async def deliver(order_id: str) -> str:
    key = durable.idempotency_key()
    note(body="deliver", key=key, order_id=order_id, phase="start")
    if order_id == "poison":
        raise ValueError("this order cannot be delivered")
    await asyncio.sleep(float(os.environ.get("DURABLE_TEST_HOLD", "0")))
    note(body="deliver", key=key, order_id=order_id, phase="end")
    return f"delivered {order_id}"


@durable.workflow
async def place(order_id: str) -> str:
    ref = await deliver(order_id)
    return ref.key  # type: ignore[attr-defined]


@durable.tool(idempotent=True)
async def beat_body() -> str:
    note(body="beat", key=durable.idempotency_key())
    return "beat"


@durable.workflow
async def beat() -> str:
    return await beat_body()


WORKFLOWS = [inbox, ticker, sender, place]
SCHEDULED = durable.Worker(
    durable.memory_world(), workflows=[], schedules=[durable.Schedule("beat", beat, every=1)]
)


async def _send_and_die(data: str, run_id: str, target: str) -> None:
    world = durable.local_world(data)
    append = world.log.append

    def dying_append(batch: Sequence[Append], *, sync: bool = True) -> None:
        if any(t == "message.sent" for a in batch for _, t, _ in a.rows):
            os.kill(os.getpid(), signal.SIGKILL)  # the message is stored; its record is not
        append(batch, sync=sync)

    world.log.append = dying_append  # type: ignore[method-assign]
    await durable.run_workflow(sender, target, world=world, run_id=run_id)


if __name__ == "__main__":
    data_dir, mode = sys.argv[1], sys.argv[2]
    assert mode == "send-and-die"
    asyncio.run(_send_and_die(data_dir, sys.argv[3], sys.argv[4]))
