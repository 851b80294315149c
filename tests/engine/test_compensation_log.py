"""A failed or cancelled run undoes what its log confirms: calls made in steps, sync tools, long arguments."""

from __future__ import annotations

import asyncio

import pydantic
import pytest

import durable
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.helpers.crash import on

LOG: list[str] = []


@durable.tool
async def return_car(trip: str, result: str) -> None:
    LOG.append(f"return {result}")


@durable.tool(compensate=return_car)
async def rent_car(trip: str) -> str:
    LOG.append(f"rent {trip}")
    return f"car-{trip}"


@durable.tool(idempotent=True)
async def cancel_room(trip: str, result: str) -> str:
    LOG.append(f"cancel {result}")
    return f"cancelled {result}"


@durable.tool(compensate=cancel_room)
async def book_room(trip: str) -> str:
    LOG.append(f"book {trip}")
    return f"room-{trip}"


@durable.tool
async def release_room(trip: str, result: str) -> None:
    LOG.append(f"release {result}")


@durable.tool(compensate=release_room)
async def hold_room(trip: str) -> str:
    LOG.append(f"hold {trip}")
    return f"held-{trip}"


@durable.tool
async def fly(trip: str) -> str:
    raise durable.NonRetryableError("no flight to the hotel")


@durable.step
async def reserve(trip: str) -> str:
    return f"{await rent_car(trip)} {await book_room(trip)}"


@durable.step
async def reserve_plainly(trip: str) -> str:
    return f"{await rent_car(trip)} {await hold_room(trip)}"


@durable.workflow
async def step_trip(trip: str) -> str:
    await reserve(trip)
    return await fly(trip)


@durable.workflow
async def plain_step_trip(trip: str) -> str:
    await reserve_plainly(trip)
    return await fly(trip)


UNDONE = ["compensate:reserve.tool:book_room#1", "compensate:reserve.tool:rent_car#0"]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LOG.clear()


def _events(world: durable.World, run_id: str) -> list[str]:
    return [e.type for e in world.events(run_id)]


def test_a_crash_inside_the_undo_of_a_call_made_in_a_step_resumes_every_undo(worlds: Worlds) -> None:
    """Cut before cancel_room's receipt: the resume re-drives it, then undoes the car, and records both."""
    crashing = worlds.crashing(on("effect.receipt", "compensate:reserve.tool:book_room#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(step_trip, "t", world=crashing, run_id="s"))
    assert LOG == ["rent t", "book t", "cancel room-t"]
    world = worlds.open()
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(step_trip, "t", world=world, run_id="s"))
    assert LOG == ["rent t", "book t", "cancel room-t", "cancel room-t", "return car-t"]
    assert world.events("s")[-1].compensated == UNDONE  # type: ignore[union-attr]
    assert _events(world, "s").count("run.failed") == 1


def test_a_step_replayed_whole_still_has_its_calls_undone(worlds: Worlds) -> None:
    """Cut before the failing call: the resume replays the step without its body, fails, and undoes both."""
    crashing = worlds.crashing(on("effect.intent", "tool:fly#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(step_trip, "t", world=crashing, run_id="s"))
    world = worlds.open()
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(step_trip, "t", world=world, run_id="s"))
    assert LOG == ["rent t", "book t", "cancel room-t", "return car-t"]
    assert world.events("s")[-1].compensated == UNDONE  # type: ignore[union-attr]


def test_a_plain_undo_of_a_call_made_in_a_step_cut_mid_call_is_an_unknown_commit(worlds: Worlds) -> None:
    """Cut before release_room's receipt: the resume refuses to call it again, and undoes nothing older."""
    crashing = worlds.crashing(on("effect.receipt", "compensate:reserve_plainly.tool:hold_room#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(plain_step_trip, "t", world=crashing, run_id="s"))
    with pytest.raises(durable.UnknownCommitError) as info:
        asyncio.run(durable.run_workflow(plain_step_trip, "t", world=worlds.open(), run_id="s"))
    assert info.value.key == "compensate:reserve_plainly.tool:hold_room#1"
    assert LOG == ["rent t", "hold t", "release held-t"]


class Seat(pydantic.BaseModel):
    row: int
    letter: str


@durable.tool
async def free_seats(flight: str, seats: list[Seat], result: int) -> None:
    LOG.append(f"free {flight} {len(seats)} {seats[-1].row}{seats[-1].letter} {result}")


@durable.tool(compensate=free_seats)
async def take_seats(flight: str, seats: list[Seat]) -> int:
    LOG.append(f"take {flight} {len(seats)}")
    return len(seats)


@durable.step
async def seat_everyone(flight: str) -> int:
    first = [Seat(row=r, letter="A") for r in range(60)]  # long: kept beside the log
    more = [*first, *(Seat(row=r, letter="B") for r in range(20))]  # kept as what it adds to the first
    return await take_seats(flight, first) + await take_seats(flight, more)


@durable.workflow
async def charter(flight: str) -> str:
    await seat_everyone(flight)
    return await fly(flight)


def test_an_undo_gets_its_calls_arguments_back_from_an_artifact_and_from_a_delta(worlds: Worlds) -> None:
    """Long argument lists (stored whole, then as a delta) come back whole and typed to each undo."""
    crashing = worlds.crashing(on("effect.intent", "tool:fly#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(charter, "LX1", world=crashing, run_id="c"))
    intents = [e for e in worlds.open().events("c") if e.type == "effect.intent"]
    assert [sorted((e.input_ref or {}).keys()) for e in intents] == [["artifact"], ["append", "args", "base"]]  # type: ignore[union-attr]
    world = worlds.open()
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(charter, "LX1", world=world, run_id="c"))
    assert LOG[2:] == ["free LX1 80 19B 80", "free LX1 60 59A 60"]


@durable.tool(compensate=cancel_room)
def book_room_by_phone(trip: str) -> str:
    LOG.append(f"book {trip} by phone")
    return f"phoned-{trip}"


@durable.workflow
async def mixed_trip(trip: str) -> str:
    await rent_car(trip)  # async
    book_room_by_phone(trip)  # sync: called without await
    return await fly(trip)


GATE: dict[str, asyncio.Event] = {}


@durable.step
async def wait_at_the_gate(trip: str) -> str:
    GATE["reached"].set()
    await GATE["open"].wait()
    return trip


@durable.workflow
async def gated_trip(trip: str) -> str:
    await rent_car(trip)
    book_room_by_phone(trip)
    await wait_at_the_gate(trip)
    return await fly(trip)


MIXED = ["compensate:tool:book_room_by_phone#1", "compensate:tool:rent_car#0"]


def test_a_sync_tool_is_undone_like_an_async_one_when_its_run_fails(world: durable.World) -> None:
    """A sync @tool(compensate=) booked the room: the failed run undoes the room, then the car."""
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(mixed_trip, "m", world=world, run_id="m"))
    assert LOG == ["rent m", "book m by phone", "cancel phoned-m", "return car-m"]
    assert world.events("m")[-1].compensated == MIXED  # type: ignore[union-attr]


def test_a_sync_tool_is_undone_like_an_async_one_when_its_run_is_cancelled(world: durable.World) -> None:
    """Cancelled by the process that drives it, at the gate: both bookings are undone, newest first."""

    async def go() -> durable.RunStatus:
        GATE.update(reached=asyncio.Event(), open=asyncio.Event())
        h = await durable.start_workflow(gated_trip, "m", world=world, run_id="m")
        await GATE["reached"].wait()
        await h.cancel()
        GATE["open"].set()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("cancelled", MIXED)
    assert LOG == ["rent m", "book m by phone", "cancel phoned-m", "return car-m"]
