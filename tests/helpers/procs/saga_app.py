"""Sagas whose undos hang until ``go`` exists, so a test can kill the process that runs them.

A trip books a car (undone by ``return_car``, plain, quick) and then a room
(undone by ``cancel_room``: idempotent in ``step_trip``, plain in the
others), and the undos run newest first: the room's first, where the test
kills the process. Bodies note themselves in ``$DURABLE_TEST_DIR/bodies.jsonl``
(``tests.helpers.procs.unhappy_app.note``); the world is the unhappy app's.

Usage:
    python -m tests.helpers.procs.saga_app
        serves the queue ``sagas`` (prints ``serving`` once it does) until SIGTERM.
    python -m tests.helpers.procs.saga_app drive WORKFLOW INPUT RUN_ID
        runs (or resumes) the run with ``run_workflow`` in this process and prints
        its outcome as JSON: ``{"output": ...}`` or ``{"error": "<type name>"}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys

import durable
from tests.helpers.procs.unhappy_app import here, note, open_world

sagas = durable.Queue("sagas")


async def held() -> None:
    while not (here() / "go").exists():  # noqa: ASYNC110  (another process makes the file)
        await asyncio.sleep(0.02)


@durable.tool
async def return_car(trip: str, result: str) -> None:
    note(tool="return_car", result=result)


@durable.tool(compensate=return_car)
async def rent_car(trip: str) -> str:
    note(tool="rent_car")
    return f"car-{trip}"


@durable.tool(idempotent=True)
async def cancel_room(trip: str, result: str) -> str:
    note(tool="cancel_room", key=durable.idempotency_key(), result=result)
    await held()
    return f"cancelled {result}"


@durable.tool(compensate=cancel_room)
async def book_room(trip: str) -> str:
    note(tool="book_room")
    return f"room-{trip}"


@durable.tool
async def release_room(trip: str, result: str) -> str:
    note(tool="release_room", key=durable.idempotency_key(), result=result)
    await held()
    return f"released {result}"


@durable.tool(compensate=release_room)
async def hold_room(trip: str) -> str:
    note(tool="hold_room")
    return f"held-{trip}"


@durable.step
async def reserve(trip: str) -> str:
    """Both bookings inside one step: a resume replays the step whole, without its body."""
    return f"{await rent_car(trip)} {await book_room(trip)}"


@durable.workflow
async def step_trip(trip: str) -> str:
    """Books inside a step, then fails: cancel_room (idempotent, held) then return_car undo it."""
    note(wf="step_trip")
    await reserve(trip)
    raise durable.NonRetryableError("no flight to the hotel")


@durable.workflow
async def failed_trip(trip: str) -> str:
    """Books, then fails: release_room (plain, held) then return_car undo it."""
    note(wf="failed_trip")
    await rent_car(trip)
    await hold_room(trip)
    raise durable.NonRetryableError("no flight to the hotel")


@durable.workflow
async def waiting_trip(trip: str) -> str:
    """Books, then sleeps an hour: a cancellation undoes both (release_room plain, held)."""
    note(wf="waiting_trip")
    await rent_car(trip)
    await hold_room(trip)
    await durable.sleep(3600)
    return "travelled"


WORKFLOWS = [step_trip, failed_trip, waiting_trip]


async def serve() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    world = open_world()
    worker = durable.Worker(world, workflows=WORKFLOWS, queues=[sagas], name=f"sagas-{os.getpid()}")
    await worker.start()
    print("serving", flush=True)
    try:
        await worker.run()
    finally:
        world.close()


async def drive(name: str, trip: str, run_id: str) -> None:
    world = open_world()
    try:
        out = await durable.run_workflow(globals()[name], trip, world=world, run_id=run_id)
        print(json.dumps({"output": out}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__}), flush=True)
    finally:
        world.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["drive"]:
        asyncio.run(drive(*sys.argv[2:5]))
    else:
        asyncio.run(serve())
