"""Workflows that go wrong in every way a drive can, served by a worker process of their own.

Each workflow body appends a line to ``$DURABLE_TEST_DIR/bodies.jsonl`` when
it runs (its name, the pid), so a test counts the drives of a run from the
bodies themselves. The world is a Postgres one when ``DURABLE_TEST_PG_DSN``
and ``DURABLE_TEST_SCHEMA`` are set, else the data directory
``$DURABLE_TEST_DIR/data``.

Usage:
    python -m tests.helpers.procs.unhappy_app
        serves the queue ``unhappy`` (prints ``serving`` once it does) until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import durable

unhappy = durable.Queue("unhappy")
LEASE = 1.5


def here() -> Path:
    return Path(os.environ["DURABLE_TEST_DIR"])


def note(**fields: object) -> None:
    with open(here() / "bodies.jsonl", "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "t": time.time(), **fields}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def open_world() -> durable.World:
    dsn, schema = os.environ.get("DURABLE_TEST_PG_DSN"), os.environ.get("DURABLE_TEST_SCHEMA")
    if dsn and schema:
        return durable.postgres_world(dsn, schema=schema, lease=LEASE, max_size=4)
    return durable.local_world(here() / "data")


@durable.step
async def same(x: int) -> int:
    return x


@durable.workflow
async def max_visits(x: int) -> int:
    note(wf="max_visits")
    await same(1)
    return await same(2)  # a second visit of a step with max_visits=1


@durable.step
async def shapeless(x: int) -> Any:
    return object()  # nothing JSON can hold


@durable.workflow
async def serialization(x: int) -> int:
    note(wf="serialization")
    await shapeless(x)
    return x


@durable.workflow
async def configuration(x: int) -> str:
    note(wf="configuration")
    return durable.idempotency_key()  # only inside a tool's body


@durable.workflow
async def plain_error(x: int) -> int:
    note(wf="plain_error")
    raise ValueError(f"bad input {x}")


@durable.workflow
async def non_retryable(x: int) -> int:
    note(wf="non_retryable")
    raise durable.NonRetryableError("the card was declined")


@durable.workflow
async def flaky(x: int) -> int:
    note(wf="flaky")
    if not (here() / "fixed").exists():
        raise ValueError("not fixed yet")
    return x


@durable.tool
async def charge(cents: int) -> str:
    """A plain tool: neither idempotent nor reconcilable. It hangs until ``go`` exists."""
    note(tool="charge", key=durable.idempotency_key())
    while not (here() / "go").exists():  # noqa: ASYNC110  (another process makes the file)
        await asyncio.sleep(0.02)
    return f"charged {cents}"


@durable.workflow
async def unknown_commit(cents: int) -> str:
    note(wf="unknown_commit")
    receipt = await charge(cents)
    return f"done: {receipt}"


@durable.workflow
async def unknown_commit_in_child(cents: int) -> str:
    note(wf="unknown_commit_in_child")
    return f"ordered, {await unknown_commit(cents)}"


@durable.step
async def left(x: int) -> int:
    return x


@durable.step
async def right(x: int) -> int:
    return x


@durable.workflow
async def nondeterminism(x: int) -> int:
    note(wf="nondeterminism")
    # The code "changes" under the run when the file ``shifted`` appears.
    first = await (right(x) if (here() / "shifted").exists() else left(x))
    answer = durable.interrupt("go on?")
    return first + int(answer)


@durable.workflow(version=os.environ.get("DURABLE_TEST_VERSION", "1"))
async def drift(x: int) -> int:
    note(wf="drift")
    answer = durable.interrupt("go on?")
    return x + int(answer)


@durable.workflow(max_recovery_attempts=2)
async def poison(x: int) -> int:
    note(wf="poison")
    os.kill(os.getpid(), signal.SIGKILL)  # takes its worker down, every time
    return x


@durable.step
async def wait_a_little(x: int) -> int:
    return x


@durable.workflow
async def healthy(x: int) -> int:
    note(wf="healthy", x=x)
    await durable.sleep(float(os.environ.get("DURABLE_TEST_PAUSE", "0.6")))
    return await wait_a_little(x) + 1


@durable.model_call
async def think(turn: int) -> dict[str, Any]:
    """A model call that reports its usage, as the integrations record a response's."""
    note(model="think", turn=turn)
    return {"model": "m", "usage": {"input_tokens": 10, "output_tokens": 2}, "turn": turn}


@durable.step(max_visits=10)
async def hold(turn: int) -> int:
    """At turn 2 it waits until ``go`` exists (the test kills its worker meanwhile)."""
    if turn == 2:
        note(hold=turn)
        while not (here() / "go").exists():  # noqa: ASYNC110  (another process makes the file)
            await asyncio.sleep(0.02)
    return turn


@durable.workflow
async def budgeted(turns: int) -> int:
    note(wf="budgeted")
    for i in range(turns):
        await think(i)
        await hold(i)
    return turns


@durable.tool(idempotent=True)
async def unbook(room: str, result: str) -> str:
    """Undoes a booking; it hangs until ``go`` exists (the test kills its worker meanwhile)."""
    note(tool="unbook", key=durable.idempotency_key(), result=result)
    while not (here() / "go").exists():  # noqa: ASYNC110  (another process makes the file)
        await asyncio.sleep(0.02)
    return f"unbooked {result}"


@durable.tool(compensate=unbook)
async def book_room(room: str) -> str:
    note(tool="book_room")
    return f"bk-{room}"


@durable.tool
async def unpay(room: str, result: str) -> None:
    note(tool="unpay", result=result)


@durable.tool(compensate=unpay)
async def pay_room(room: str) -> str:
    note(tool="pay_room")
    return f"paid-{room}"


@durable.workflow
async def saga(room: str) -> str:
    note(wf="saga")
    await pay_room(room)
    await book_room(room)
    raise durable.NonRetryableError("no taxi to the hotel")


@durable.tool
async def unlend(room: str, result: str) -> None:
    note(tool="unlend", result=result)


@durable.tool(compensate=unlend)
async def lend_car(room: str) -> str:
    note(tool="lend_car")
    return f"car-{room}"


@durable.workflow
async def visits_saga(room: str) -> str:
    """Two confirmed calls, then a failure the runtime records (a second visit of ``same``)."""
    note(wf="visits_saga")
    await pay_room(room)
    await lend_car(room)
    await same(1)
    return str(await same(2))


@durable.workflow
async def waiting_saga(room: str) -> str:
    """Two confirmed calls, then a wait for an answer: a cancellation must undo both."""
    note(wf="waiting_saga")
    await pay_room(room)
    await book_room(room)
    return str(durable.interrupt({"confirm": room}))


def hold_before_end(world: durable.World) -> None:
    """Hang the worker (until it is killed) when it is about to append a ``run.failed``."""
    append = world.log.append

    def held(batch: Any, *, sync: bool = True) -> None:
        if any(t == "run.failed" for a in batch for _, t, _ in a.rows):
            (here() / "holding-end").touch()
            while True:
                time.sleep(1)
        append(batch, sync=sync)

    world.log.append = held  # type: ignore[method-assign]


@durable.workflow
async def digest(batch: str) -> str:
    """A run that a burst of debounced starts makes once, with the last input."""
    note(wf="digest", batch=batch)
    return batch


WORKFLOWS = [
    budgeted,
    digest,
    saga,
    visits_saga,
    waiting_saga,
    max_visits,
    serialization,
    configuration,
    plain_error,
    non_retryable,
    flaky,
    unknown_commit,
    unknown_commit_in_child,
    nondeterminism,
    drift,
    poison,
    healthy,
]


async def serve() -> None:
    level = logging.INFO if os.environ.get("DURABLE_TEST_INFO") else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("durable").setLevel(level)
    world = open_world()
    if os.environ.get("DURABLE_TEST_HOLD_END"):
        hold_before_end(world)
    worker = durable.Worker(world, workflows=WORKFLOWS, queues=[unhappy], name=f"unhappy-{os.getpid()}")
    await worker.start()
    print("serving", flush=True)
    try:
        await worker.run()
    finally:
        world.close()


async def start_digest(batch: str, debounce: float) -> None:
    """Start a debounced ``digest`` run (key ``digest``) and print its run id."""
    world = open_world()
    try:
        h = durable.start_workflow(
            digest, batch, world=world, queue=unhappy, debounce_key="digest", debounce=debounce
        )
        print(h.run_id, flush=True)
    finally:
        world.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "start-digest":
        asyncio.run(start_digest(sys.argv[2], float(sys.argv[3])))
    else:
        asyncio.run(serve())
