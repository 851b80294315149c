"""Every final failure undoes the confirmed calls before the run's end is recorded, whoever records it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable.testing import SimulatedCrash
from tests.conftest import Worlds

LOG: list[str] = []


@durable.tool(idempotent=True)
async def refund(order: str, result: str) -> str:
    LOG.append(f"refund {order} {result}")
    return f"refunded {result}"


@durable.tool(compensate=refund)
async def charge(order: str) -> str:
    LOG.append(f"charge {order}")
    return f"ch-{order}"


@durable.tool(idempotent=True)
async def release(order: str, result: str) -> None:
    LOG.append(f"release {order} {result}")


@durable.tool(compensate=release)
async def reserve(order: str) -> str:
    LOG.append(f"reserve {order}")
    return f"rs-{order}"


@durable.step
async def look(order: str) -> str:
    return order


@durable.step
async def shapeless(order: str) -> Any:
    return object()  # nothing JSON can hold


@durable.workflow
async def loops_twice(order: str) -> str:
    await charge(order)
    await reserve(order)
    await look(order)
    return await look(order)  # a second visit of a step with max_visits=1


@durable.workflow
async def unstorable(order: str) -> str:
    await charge(order)
    await reserve(order)
    await shapeless(order)
    return order


@durable.workflow
async def misconfigured(order: str) -> str:
    await charge(order)
    await reserve(order)
    await durable.sleep("soon")  # type: ignore[arg-type]
    return order


@durable.workflow
async def held(order: str) -> str:
    await charge(order)
    await reserve(order)
    await durable.sleep(3600)
    return order


UNDONE = ["compensate:tool:reserve#1", "compensate:tool:charge#0"]
KINDS = [
    (loops_twice, durable.MaxVisitsExceededError),
    (unstorable, durable.SerializationError),
    (misconfigured, durable.ConfigurationError),
]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LOG.clear()


async def _failed_under_runtime(world: durable.World, wf: Any, run_id: str) -> durable.RunStatus:
    h = await durable.start_workflow(wf, "o1", world=world, run_id=run_id)
    with pytest.raises(durable.DurableError):
        await h.result(timeout=30)
    return await h.status_detail()


async def _recovered(world: durable.World, wf: Any, run_id: str) -> durable.RunStatus:
    (h,) = await durable.recover_runs(world, workflows=[wf])
    assert h.run_id == run_id
    with pytest.raises(durable.DurableError):
        await h.result(timeout=30)
    return await h.status_detail()


@pytest.mark.parametrize(("wf", "error"), KINDS, ids=["max_visits", "serialization", "configuration"])
def test_a_failure_the_runtime_records_undoes_the_confirmed_calls_newest_first(
    world: durable.World, wf: Any, error: type[Exception]
) -> None:
    """The runtime records the run failed; release then refund ran once, and run.failed names them."""
    st = asyncio.run(_failed_under_runtime(world, wf, "r"))
    assert st.status == "failed"
    assert st.compensated == UNDONE
    assert LOG == ["charge o1", "reserve o1", "release o1 rs-o1", "refund o1 ch-o1"]
    end = world.events("r")[-1]
    assert end.type == "run.failed"
    assert end.error_type.endswith(error.__name__)  # type: ignore[union-attr]
    assert end.compensated == UNDONE  # type: ignore[union-attr]


@pytest.mark.parametrize(("wf", "error"), KINDS, ids=["max_visits", "serialization", "configuration"])
def test_a_drive_that_undid_its_calls_without_an_end_is_ended_once_by_the_next(
    worlds: Worlds, wf: Any, error: type[Exception]
) -> None:
    """A drive stopped after both undos and before run.failed: the next ends the run and undoes nothing."""
    cut = worlds.crashing(lambda t, d: t == "run.failed")  # the log dies as the end is written
    with pytest.raises(error):
        asyncio.run(durable.run_workflow(wf, "o1", world=cut, run_id="r"))
    assert LOG.count("refund o1 ch-o1") == 1
    assert not [e for e in worlds.open().events("r") if e.type == "run.failed"]
    world = worlds.open()
    st = asyncio.run(_recovered(world, wf, "r"))
    assert st.status == "failed"
    assert st.compensated == UNDONE
    assert LOG.count("refund o1 ch-o1") == 1
    assert LOG.count("release o1 rs-o1") == 1
    assert [e.type for e in world.events("r")].count("run.failed") == 1


def test_a_plain_run_workflow_undoes_a_final_failure_once_across_calls(worlds: Worlds) -> None:
    """Without a runtime the failure is raised again on each call; the undos ran on the first only."""
    for _ in range(2):
        with pytest.raises(durable.MaxVisitsExceededError):
            asyncio.run(durable.run_workflow(loops_twice, "o1", world=worlds.open(), run_id="r"))
    assert LOG == ["charge o1", "reserve o1", "release o1 rs-o1", "refund o1 ch-o1"]


def test_a_cancellation_seen_during_replay_undoes_every_confirmed_call(worlds: Worlds) -> None:
    """Cancelled as soon as a recovered drive starts: the recorded calls replay first, then both undos run."""
    crashing = worlds.crashing(lambda t, d: t == "timer.set")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(held, "o3", world=crashing, run_id="c"))

    async def go() -> durable.RunStatus:
        world = worlds.open()
        h = await durable.resume_run("c", world=world, workflows=[held])
        await h.cancel()  # before the drive's first call: it reaches the guard during replay
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert st.status == "cancelled"
    assert st.compensated == UNDONE
    assert LOG == ["charge o3", "reserve o3", "release o3 rs-o3", "refund o3 ch-o3"]


def test_a_body_that_fails_for_good_while_its_undo_is_cut_resumes_the_undo(worlds: Worlds) -> None:
    """A failure recorded by the runtime, cut inside the refund: the resume re-drives only the refund."""
    crashing = worlds.crashing(
        lambda t, d: t == "effect.receipt" and d.get("key") == "compensate:tool:charge#0"
    )
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(unstorable, "o1", world=crashing, run_id="r"))
    st = asyncio.run(_recovered(worlds.open(), unstorable, "r"))
    assert st.compensated == UNDONE
    assert LOG.count("release o1 rs-o1") == 1
    assert LOG.count("refund o1 ch-o1") == 2  # cut mid-call and idempotent: re-driven with its key


@durable.workflow
async def asks_after_booking(order: str) -> str:
    await charge(order)
    await reserve(order)
    answer = durable.interrupt({"confirm": order})
    return f"{order}: {answer}"


async def _interrupted(world: durable.World, run_id: str) -> durable.RunHandle:
    h = await durable.start_workflow(asks_after_booking, "o4", world=world, run_id=run_id)
    with pytest.raises(durable.RunInterrupted):  # once its drive has ended: nobody drives it
        await h.result(timeout=30)
    return h


def test_cancelling_a_run_that_waits_for_an_answer_undoes_its_confirmed_calls(world: durable.World) -> None:
    """Nobody drives a waiting run: the cancel replays it to its interrupt, undoes both calls, ends it."""

    async def go() -> durable.RunStatus:
        h = await _interrupted(world, "w")
        await h.cancel()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert st.status == "cancelled"
    assert st.compensated == UNDONE
    assert LOG == ["charge o4", "reserve o4", "release o4 rs-o4", "refund o4 ch-o4"]
    assert [e.type for e in world.events("w")][-1] == "run.cancelled"


def test_a_cancel_from_a_process_without_the_code_waits_for_one_that_has_it(worlds: Worlds) -> None:
    """Without the workflow nothing can be undone: the run keeps waiting; a process with the code ends it."""
    asyncio.run(_interrupted(worlds.open(), "w"))
    stranger = worlds.open()  # another process: it never started or served the workflow
    assert durable.runtime.cancel_run(stranger, "w") == "interrupted"
    assert not [e for e in stranger.events("w") if e.type == "run.cancelled"]
    assert LOG == ["charge o4", "reserve o4"]

    async def knowing() -> durable.RunStatus:
        world = worlds.open()
        assert await durable.recover_runs(world, workflows=[asks_after_booking]) == []  # it knows the code
        h = durable.handle("w", world=world)
        await h.cancel()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(knowing())
    assert st.status == "cancelled"
    assert st.compensated == UNDONE
    assert LOG.count("refund o4 ch-o4") == 1
