"""Compensation: compensate= tools run newest first when a run fails for good or is cancelled, once each."""

from __future__ import annotations

import asyncio
import time

import pytest

import durable
from durable.testing import SimulatedCrash
from tests.conftest import Worlds

LOG: list[str] = []
FAIL_REFUND = {"on": False}


@durable.tool(idempotent=True)
async def refund(order: str, result: str) -> str:
    LOG.append(f"refund {order} {result}")
    if FAIL_REFUND["on"]:
        raise durable.NonRetryableError("the bank is down")
    return f"refunded {result}"


@durable.tool(compensate=refund)
async def charge(order: str) -> str:
    LOG.append(f"charge {order}")
    return f"ch-{order}"


@durable.tool
async def release(order: str, result: str) -> None:
    LOG.append(f"release {order} {result}")


@durable.tool(compensate=release)
async def reserve(order: str) -> str:
    LOG.append(f"reserve {order}")
    return f"rs-{order}"


@durable.tool
async def ship(order: str) -> str:
    LOG.append(f"ship {order}")
    raise durable.NonRetryableError("no courier")


@durable.workflow
async def booking(order: str) -> str:
    await charge(order)
    await reserve(order)
    return await ship(order)


@durable.workflow
async def held_booking(order: str) -> str:
    await charge(order)
    await durable.sleep(3600)
    return "never"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LOG.clear()
    FAIL_REFUND["on"] = False


def test_a_failed_run_undoes_its_confirmed_calls_newest_first_with_their_arguments_and_results(
    world: durable.World,
) -> None:
    """Ship fails: release then refund run once, each with the original argument and result=."""
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(booking, "o1", world=world, run_id="b"))
    assert LOG == ["charge o1", "reserve o1", "ship o1", "release o1 rs-o1", "refund o1 ch-o1"]
    receipts = [e.key for e in world.events("b") if e.type == "effect.receipt"]  # type: ignore[union-attr]
    assert receipts[-2:] == ["compensate:tool:reserve#1", "compensate:tool:charge#0"]
    end = world.events("b")[-1]
    assert end.type == "run.failed"
    assert end.compensated == ["compensate:tool:reserve#1", "compensate:tool:charge#0"]  # type: ignore[union-attr]


def test_a_finished_compensated_run_replays_without_undoing_anything_again(worlds: Worlds) -> None:
    """Called again, the failed run re-raises its error; no compensation runs a second time."""
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(booking, "o1", world=worlds.open(), run_id="b"))
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(booking, "o1", world=worlds.open(), run_id="b"))
    assert LOG.count("refund o1 ch-o1") == 1
    assert LOG.count("release o1 rs-o1") == 1


def test_a_crash_between_compensations_resumes_with_the_ones_not_yet_confirmed(worlds: Worlds) -> None:
    """Cut before the refund's receipt: the resume re-drives the idempotent refund, not the release."""
    crashing = worlds.crashing(
        lambda t, d: t == "effect.receipt" and d.get("key") == "compensate:tool:charge#0"
    )
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(booking, "o1", world=crashing, run_id="b"))
    assert LOG.count("refund o1 ch-o1") == 1
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(booking, "o1", world=worlds.open(), run_id="b"))
    assert LOG.count("release o1 rs-o1") == 1  # confirmed before the crash: never again
    assert LOG.count("refund o1 ch-o1") == 2  # cut mid-call and idempotent: re-driven with the same key
    assert LOG.count("ship o1") == 1  # its failure replays


def test_a_plain_compensation_cut_mid_call_is_an_unknown_commit(worlds: Worlds) -> None:
    """Cut before release's receipt: release is a plain tool, so the resume refuses to call it again."""
    crashing = worlds.crashing(
        lambda t, d: t == "effect.receipt" and d.get("key") == "compensate:tool:reserve#1"
    )
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(booking, "o1", world=crashing, run_id="b"))
    with pytest.raises(durable.UnknownCommitError) as info:
        asyncio.run(durable.run_workflow(booking, "o1", world=worlds.open(), run_id="b"))
    assert info.value.key == "compensate:tool:reserve#1"
    assert LOG.count("release o1 rs-o1") == 1
    assert "refund o1 ch-o1" not in LOG


def test_a_compensation_that_fails_for_good_blocks_the_run_with_its_key(world: durable.World) -> None:
    """The refund fails: the run is blocked (compensation_failed) naming compensate:tool:charge#0."""
    FAIL_REFUND["on"] = True

    async def go() -> None:
        h = await durable.start_workflow(booking, "o1", world=world, run_id="b")
        with pytest.raises(durable.RunBlockedError) as info:
            await h.result(timeout=30)
        assert info.value.reason == "compensation_failed"
        assert isinstance(info.value.cause, durable.CompensationFailedError)
        st = await h.status_detail()
        assert st.error is not None and st.error["key"] == "compensate:tool:charge#0"
        assert not [e for e in world.events("b") if e.type == "run.failed"]
        FAIL_REFUND["on"] = False  # the person fixed the bank, and resumes
        await durable.resume_run("b", world=world, workflows=[booking])
        with pytest.raises(durable.NonRetryableError):
            await h.result(timeout=30)
        assert (await h.status_detail()).compensated == [
            "compensate:tool:reserve#1",
            "compensate:tool:charge#0",
        ]

    asyncio.run(go())
    assert LOG.count("release o1 rs-o1") == 1
    assert LOG.count("refund o1 ch-o1") == 2


def test_cancelling_a_run_after_a_confirmed_tool_undoes_it(world: durable.World) -> None:
    """Cancelled while it sleeps after a confirmed charge: the refund runs and the run ends cancelled."""

    async def go() -> None:
        h = await durable.start_workflow(held_booking, "o2", world=world, run_id="c")
        end = time.monotonic() + 30
        while "charge o2" not in LOG:
            assert time.monotonic() < end, "the charge never ran"
            await asyncio.sleep(0.01)
        await h.cancel()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        st = await h.status_detail()
        assert st.status == "cancelled"
        assert st.compensated == ["compensate:tool:charge#0"]

    asyncio.run(go())
    assert LOG == ["charge o2", "refund o2 ch-o2"]


def test_compensate_must_be_an_async_durable_tool() -> None:
    """compensate= with a plain function is refused when the tool is decorated."""

    async def undo(order: str, result: str) -> None:
        return None

    with pytest.raises(durable.ConfigurationError, match=r"compensate= takes an async @durable\.tool"):

        @durable.tool(compensate=undo)
        async def pay(order: str) -> str:
            return order


FLAKY = {"left": 0}
RECONCILED: list[str] = []


@durable.tool(retry=durable.RetryPolicy(max_attempts=3, backoff=0))
async def unlock(door: str, result: str) -> str:
    LOG.append(f"unlock {door}")
    if FLAKY["left"] > 0:
        FLAKY["left"] -= 1
        raise ConnectionError("the lock did not answer")
    return "unlocked"


@durable.tool(compensate=unlock)
async def lock(door: str) -> str:
    return f"locked {door}"


def _asked(key: str, inp: dict[str, object]) -> object:
    RECONCILED.append(key)
    return "restocked (seen in the warehouse)"


@durable.tool(reconcile=_asked)
async def restock(item: str, result: str) -> str:
    LOG.append(f"restock {item}")
    return "restocked"


@durable.tool(compensate=restock)
async def take(item: str) -> str:
    return f"took {item}"


@durable.workflow
async def lock_then_fail(door: str) -> str:
    await lock(door)
    raise durable.NonRetryableError("the alarm went off")


@durable.workflow
async def take_then_fail(item: str) -> str:
    await take(item)
    raise durable.NonRetryableError("the order was withdrawn")


def test_a_compensation_is_retried_by_its_own_policy(world: durable.World) -> None:
    """The unlock fails twice, then succeeds on its third attempt under retry=; the run ends failed."""
    FLAKY["left"] = 2
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(lock_then_fail, "front", world=world, run_id="l"))
    assert LOG == ["unlock front"] * 3
    assert world.events("l")[-1].compensated == ["compensate:tool:lock#0"]  # type: ignore[union-attr]


def test_a_reconcilable_compensation_cut_mid_call_is_asked_before_it_is_called_again(worlds: Worlds) -> None:
    """Cut before restock's receipt: the resume asks reconcile=, records its answer, and does not call it."""
    RECONCILED.clear()
    crashing = worlds.crashing(
        lambda t, d: t == "effect.receipt" and d.get("key") == "compensate:tool:take#0"
    )
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(take_then_fail, "tent", world=crashing, run_id="t"))
    world = worlds.open()
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(take_then_fail, "tent", world=world, run_id="t"))
    assert LOG == ["restock tent"]
    assert RECONCILED == ["t:compensate:tool:take#0"]
    receipt = [e for e in world.events("t") if e.type == "effect.receipt"][-1]
    assert receipt.result == "restocked (seen in the warehouse)"  # type: ignore[union-attr]
