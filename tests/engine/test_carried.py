"""Durable errors carried through framework code that catches every ``Exception``."""

from __future__ import annotations

import asyncio

import pytest

import durable
from durable.engine import Carried, carried, durable_cause
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


def test_a_carried_unknown_commit_ends_the_run_as_the_error_itself(worlds: Worlds) -> None:
    """Framework code that turns every ``Exception`` into text lets ``Carried`` through to the runner."""
    carry = {"on": False}

    @durable.tool(name="charge")
    async def charge(n: int) -> int:
        return n

    async def wrapped_charge(n: int) -> int:  # an integration's wrapper around the tool
        try:
            return await charge(n)
        except durable.DurableError as exc:
            raise (carried(exc) if carry["on"] else exc) from exc

    async def framework_tool(n: int) -> str:  # what an agent framework does around a tool
        try:
            return str(await wrapped_charge(n))
        except Exception as exc:
            return f"error: {type(exc).__name__}"

    @durable.step
    async def turn(n: int) -> str:
        out = await framework_tool(n)
        await asyncio.sleep(0)
        return out

    @durable.workflow(name="wf")
    async def wf(n: int) -> str:
        return await turn(n)

    for run_id in ("swallowed", "carried"):
        with pytest.raises(SimulatedCrash):
            asyncio.run(
                durable.run_workflow(wf, 3, world=worlds.crashing(on("effect.receipt")), run_id=run_id)
            )
    assert asyncio.run(durable.run_workflow(wf, 3, world=worlds.open(), run_id="swallowed")) == (
        "error: UnknownCommitError"
    )
    carry["on"] = True
    with pytest.raises(durable.UnknownCommitError):
        asyncio.run(durable.run_workflow(wf, 3, world=worlds.open(), run_id="carried"))


def test_durable_cause_finds_the_error_a_framework_wrapped() -> None:
    """``durable_cause`` looks through ``raise ... from`` chains and carriers; other errors have none."""
    inner = durable.UnknownCommitError("cut", run_id="r", key="k")
    wrapped = RuntimeError("Error running tool refund")
    wrapped.__cause__ = inner  # what `raise RuntimeError(...) from inner` leaves
    assert durable_cause(wrapped) is inner
    assert durable_cause(Carried(inner)) is inner
    assert durable_cause(ValueError("plain")) is None
    assert durable_cause(durable.NonRetryableError("a tool's own outcome")) is None
