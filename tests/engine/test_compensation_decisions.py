"""Compensations meet a person's decisions, a second cancel, a spent budget and changed code."""

from __future__ import annotations

import asyncio
import shlex
from typing import Any

import pytest

import durable
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.helpers.crash import on

LOG: list[str] = []
BANK = {"down": False}
GATE: dict[str, asyncio.Event] = {}


@durable.tool(idempotent=True)
async def refund(order: str, result: str) -> str:
    LOG.append(f"refund {result}")
    if BANK["down"]:
        raise durable.NonRetryableError("the bank is down")
    return f"refunded {result}"


@durable.tool(compensate=refund)
async def charge(order: str) -> str:
    LOG.append(f"charge {order}")
    return f"ch-{order}"


@durable.tool
async def release(order: str, result: str) -> str:
    LOG.append(f"release {result}")
    return f"released {result}"


@durable.tool(compensate=release)
async def reserve(order: str) -> str:
    LOG.append(f"reserve {order}")
    return f"rs-{order}"


@durable.workflow
async def asks(order: str) -> str:
    await charge(order)
    return str(durable.interrupt({"confirm": order}))


@durable.workflow
async def booking(order: str) -> str:
    await charge(order)
    await reserve(order)
    raise durable.NonRetryableError("no courier")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LOG.clear()
    BANK["down"] = False


def test_a_cancelled_run_whose_undo_failed_is_still_cancelled_when_resumed(world: durable.World) -> None:
    """The refund fails while a cancel undoes the run; resumed after the fix, it is refunded and cancelled."""

    async def go() -> durable.RunStatus:
        h = await durable.start_workflow(asks, "o1", world=world, run_id="a")
        with pytest.raises(durable.RunInterrupted):
            await h.result(timeout=30)
        BANK["down"] = True
        await h.cancel()
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=30)
        assert blocked.value.reason == "compensation_failed"
        BANK["down"] = False
        await durable.resume_run("a", world=world, workflows=[asks])
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("cancelled", ["compensate:tool:charge#0"])
    assert LOG == ["charge o1", "refund ch-o1", "refund ch-o1"]


UNDONE = ["compensate:tool:reserve#1", "compensate:tool:charge#0"]


def test_a_plain_undo_cut_mid_call_resolved_as_happened_is_not_called_again(worlds: Worlds) -> None:
    """resolve('compensate:...', happened=True, workflows=[...]) takes the undo as done; the rest run."""
    crashing = worlds.crashing(on("effect.receipt", "compensate:tool:reserve#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(booking, "o2", world=crashing, run_id="b"))
    world = worlds.open()
    with pytest.raises(durable.UnknownCommitError):
        asyncio.run(durable.run_workflow(booking, "o2", world=world, run_id="b"))

    async def go() -> durable.RunStatus:
        h = durable.handle("b", world=world)
        await h.resolve("compensate:tool:reserve#1", happened=True, result="released", workflows=[booking])
        with pytest.raises(durable.NonRetryableError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("failed", UNDONE)
    assert LOG == ["charge o2", "reserve o2", "release rs-o2", "refund ch-o2"]


def test_an_undo_that_failed_for_good_can_be_recorded_as_done_by_hand(world: durable.World) -> None:
    """The bank refuses the refund: the run is blocked; the printed resolve records it, and the run ends."""

    async def go() -> durable.RunStatus:
        h = await durable.start_workflow(booking, "o3", world=world, run_id="c")
        BANK["down"] = True
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=30)
        assert blocked.value.reason == "compensation_failed"
        key = "compensate:tool:charge#0"
        assert f"little resolve c {shlex.quote(key)} --happened --result JSON" in blocked.value.fixes[1]
        assert f"`little resolve c {key} --happened`" in str(blocked.value.cause)
        await h.resolve(key, happened=True, result="refunded by hand")
        with pytest.raises(durable.NonRetryableError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("failed", UNDONE)
    assert LOG == ["charge o3", "reserve o3", "release rs-o3", "refund ch-o3"]  # never called again


@durable.tool
async def unwind(order: str, result: str) -> str:
    GATE["reached"].set()
    await GATE["open"].wait()
    LOG.append(f"unwind {result}")
    return "unwound"


@durable.tool(compensate=unwind)
async def wind(order: str) -> str:
    LOG.append(f"wind {order}")
    return f"wd-{order}"


@durable.workflow
async def winding(order: str) -> str:
    await charge(order)
    await wind(order)
    raise durable.NonRetryableError("the spring broke")


def test_a_cancel_that_arrives_while_the_undos_run_lets_them_finish_once(world: durable.World) -> None:
    """Cancelled while unwind runs: both undos run once and the run ends failed, its own outcome."""

    async def go() -> durable.RunStatus:
        GATE.update(reached=asyncio.Event(), open=asyncio.Event())
        h = await durable.start_workflow(winding, "o4", world=world, run_id="d")
        await GATE["reached"].wait()
        await h.cancel()
        GATE["open"].set()
        with pytest.raises(durable.NonRetryableError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("failed", ["compensate:tool:wind#1", "compensate:tool:charge#0"])
    assert LOG == ["charge o4", "wind o4", "unwind wd-o4", "refund ch-o4"]
    assert "run.cancelled" not in [e.type for e in world.events("d")]


@durable.model_call
async def think(turn: int) -> dict[str, Any]:
    LOG.append(f"think {turn}")
    return {"model": "m", "usage": {"input_tokens": 10, "output_tokens": 2}, "turn": turn}


@durable.workflow
async def thinks_after_charging(order: str) -> str:
    await charge(order)
    await think(1)
    await think(2)
    return "done"


def test_cancelling_a_run_blocked_by_its_budget_undoes_its_calls(world: durable.World) -> None:
    """A spent budget blocks the run before its second model call; a cancel then refunds the charge."""

    async def go() -> durable.RunStatus:
        budget = durable.Budget(max_model_calls=1)
        h = await durable.start_workflow(thinks_after_charging, "o5", world=world, run_id="e", budget=budget)
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=30)
        assert blocked.value.reason == "budget"
        await h.cancel()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("cancelled", ["compensate:tool:charge#0"])
    assert LOG == ["charge o5", "think 1", "refund ch-o5"]


@durable.tool(idempotent=True)
async def apologise(order: str, result: str) -> str:
    LOG.append(f"apologise {result}")
    await think(99)  # the undo asks a model to write the apology
    return "sorry"


@durable.tool(compensate=apologise)
async def promise(order: str) -> str:
    LOG.append(f"promise {order}")
    return f"pr-{order}"


@durable.workflow
async def promises_then_fails(order: str) -> str:
    await promise(order)
    await think(1)
    raise durable.NonRetryableError("the promise cannot be kept")


def test_an_undo_stopped_by_a_spent_budget_finishes_once_the_budget_is_raised(world: durable.World) -> None:
    """The undo's model call is refused: blocked (budget); raised, the undo runs again and the run ends."""

    async def go() -> durable.RunStatus:
        budget = durable.Budget(max_model_calls=1)
        h = await durable.start_workflow(promises_then_fails, "o6", world=world, run_id="f", budget=budget)
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=30)
        assert blocked.value.reason == "budget"
        assert (await h.status_detail()).compensated == []
        await durable.resume_run(
            "f", world=world, workflows=[promises_then_fails], budget=durable.Budget(max_model_calls=2)
        )
        with pytest.raises(durable.NonRetryableError):
            await h.result(timeout=30)
        assert (await h.usage()).calls == 2
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("failed", ["compensate:tool:promise#0"])
    assert LOG == ["promise o6", "think 1", "apologise pr-o6", "apologise pr-o6", "think 99"]


@durable.tool(idempotent=True, name="unbook")
async def unbook_v1(room: str, result: str) -> str:
    LOG.append(f"unbook v1 {result}")
    return "unbooked"


@durable.tool(compensate=unbook_v1, name="book")
async def book_v1(room: str) -> str:
    LOG.append(f"book {room}")
    return f"bk-{room}"


@durable.workflow(name="stay")
async def stay_v1(room: str) -> str:
    await book_v1(room)
    raise durable.NonRetryableError("the hotel burned down")


@durable.tool(idempotent=True, name="unbook")
async def unbook_v2(room: str, result: str, fee: int = 0) -> str:
    LOG.append(f"unbook v2 {result} {fee}")
    return "unbooked"


@durable.tool(compensate=unbook_v2, name="book")
async def book_v2(room: str) -> str:
    LOG.append(f"book {room}")
    return f"bk-{room}"


@durable.workflow(name="stay")
async def stay_v2(room: str) -> str:
    await book_v2(room)
    raise durable.NonRetryableError("the hotel burned down")


def test_a_deploy_that_changed_a_cut_undos_signature_fails_closed_with_a_readable_drift(
    worlds: Worlds,
) -> None:
    """Cut inside unbook, resumed by code whose unbook takes a new parameter: drift names it; nothing runs."""
    crashing = worlds.crashing(on("effect.receipt", "compensate:tool:book#0"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(stay_v1, "r1", world=crashing, run_id="g"))
    with pytest.raises(durable.CapabilityDriftError) as drift:
        asyncio.run(durable.run_workflow(stay_v2, "r1", world=worlds.open(), run_id="g"))
    assert [c.key for c in drift.value.changes] == ["tools.unbook.signature"]
    assert "tools.unbook.signature" in str(drift.value)
    assert LOG == ["book r1", "unbook v1 bk-r1"]


def test_a_cancel_after_a_failed_run_was_undone_and_its_driver_died_names_the_undos(worlds: Worlds) -> None:
    """Undone, then killed before run.failed: the cancel that closes the run names the undos, runs none."""
    crashing = worlds.crashing(on("run.failed"))
    with pytest.raises(durable.NonRetryableError):  # the process died recording it
        asyncio.run(durable.run_workflow(booking, "o9", world=crashing, run_id="k"))
    assert LOG == ["charge o9", "reserve o9", "release rs-o9", "refund ch-o9"]
    world = worlds.open()

    async def go() -> durable.RunStatus:
        h = durable.handle("k", world=world)
        assert await h.status() == "running"  # nobody drives it
        await h.cancel()
        return await h.status_detail()

    st = asyncio.run(go())
    assert (st.status, st.compensated) == ("cancelled", UNDONE)
    assert LOG == ["charge o9", "reserve o9", "release rs-o9", "refund ch-o9"]
