"""The durable call every integration records through: ``run_effect``'s retry and compensation options."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable.integrations._effects import run_effect, undo_tool
from tests.conftest import Worlds


def test_a_retried_effect_calls_its_body_again_and_a_resume_replays_the_result(worlds: Worlds) -> None:
    """``retry=`` calls a failing body again under the policy; the resumed run calls it no more."""
    attempts: list[int] = []

    async def flaky() -> str:
        attempts.append(len(attempts))
        if len(attempts) < 3:
            raise ConnectionError("down")
        return "up"

    policy = durable.RetryPolicy(max_attempts=3, backoff=0)

    @durable.workflow
    async def ping() -> str:
        return str(await run_effect("tool", "ping", flaky, idempotent=True, retry=policy, host="a"))

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(ping, world=world, run_id="r")) == "up"
    assert attempts == [0, 1, 2]
    assert asyncio.run(durable.run_workflow(ping, world=worlds.open(), run_id="r")) == "up"
    assert attempts == [0, 1, 2]


def test_a_failed_run_undoes_its_confirmed_effects_with_their_identity_and_result(worlds: Worlds) -> None:
    """``compensate=`` gets each confirmed call's identity and recorded result, newest first."""
    undone: list[tuple[dict[str, Any], Any]] = []

    async def undo(identity: dict[str, Any], result: Any) -> None:
        undone.append((identity, result))

    refund = undo_tool("test__undo__charge", undo)

    @durable.workflow
    async def order() -> None:
        for amount in (5, 7):

            async def charge(amount: int = amount) -> dict[str, int]:
                return {"charged": amount}

            await run_effect("tool", "charge", charge, compensate=refund, amount=amount)
        raise ValueError("out of stock")

    with pytest.raises(ValueError, match="out of stock"):
        asyncio.run(durable.run_workflow(order, world=worlds.open(), run_id="r"))
    assert undone == [({"amount": 7}, {"charged": 7}), ({"amount": 5}, {"charged": 5})]
