"""A failure re-raised from the log says that it was recorded, and how to run the work again."""

from __future__ import annotations

import asyncio

import pytest

import durable
from tests.conftest import Worlds

BROKEN = {"on": True}


@durable.step
async def charge(order_id: str) -> str:
    if BROKEN["on"]:
        raise LookupError(f"no payment provider for {order_id}")
    return f"charged {order_id}"


@durable.workflow
async def checkout(order_id: str) -> str:
    return await charge(order_id)


def test_a_rerun_of_a_failed_run_says_the_failure_is_recorded_and_how_to_retry(worlds: Worlds) -> None:
    """The re-raised error keeps its type and message, and its note names the run and retry_failed=True."""
    BROKEN["on"] = True
    with pytest.raises(LookupError) as first:
        asyncio.run(durable.run_workflow(checkout, "o-1", world=worlds.open(), run_id="r"))
    assert not getattr(first.value, "__notes__", None)  # the first raise is the body's own
    BROKEN["on"] = False  # fixed, but a rerun without retry_failed= re-raises the recorded failure
    with pytest.raises(LookupError, match="no payment provider for o-1") as again:
        asyncio.run(durable.run_workflow(checkout, "o-1", world=worlds.open(), run_id="r"))
    [note] = again.value.__notes__
    assert "recorded" in note and "'r'" in note and "retry_failed=True" in note
    out = asyncio.run(
        durable.run_workflow(checkout, "o-1", world=worlds.open(), run_id="r", retry_failed=True)
    )
    assert out == "charged o-1"  # the advice, followed, works
