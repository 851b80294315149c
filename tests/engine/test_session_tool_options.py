"""Inside a session, a tool's options are part of the session manifest, as they are outside one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from tests.conftest import Worlds


def _app(**options: Any) -> Any:
    @durable.tool(name="pay", **options)
    async def pay(amount: int) -> str:
        return f"paid {amount}"

    @durable.workflow
    async def agent() -> str:
        async with durable.session("worker", tools=[pay]):
            out = await pay(5)
        return f"{out}, {durable.interrupt('ok?')}"

    return agent


def _reconcile(key: str, inp: Any) -> Any:
    return durable.NEVER_HAPPENED


@pytest.mark.parametrize(
    ("before", "after", "key"),
    [
        ({}, {"version": "2"}, "availableTools[0].options.version"),
        ({}, {"idempotent": True}, "availableTools[0].options.idempotent"),
        ({}, {"reconcile": _reconcile}, "availableTools[0].options.reconcile"),
        ({"version": "1"}, {"version": "2"}, "availableTools[0].options.version"),
    ],
)
def test_a_changed_tool_option_in_a_session_is_drift(
    worlds: Worlds, before: dict[str, Any], after: dict[str, Any], key: str
) -> None:
    """version=, idempotent and reconcile changed between runs fail the resume, naming the key."""
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(_app(**before), world=worlds.open(), run_id="r"))
    with pytest.raises(durable.CapabilityDriftError, match=key.replace("[", r"\[").replace("]", r"\]")):
        asyncio.run(durable.run_workflow(_app(**after), world=worlds.open(), run_id="r", resume="yes"))


def test_unchanged_tool_options_resume(worlds: Worlds) -> None:
    """The same options on resume: the session replays and the run finishes."""
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(_app(version="1"), world=worlds.open(), run_id="r"))
    out = asyncio.run(durable.run_workflow(_app(version="1"), world=worlds.open(), run_id="r", resume="yes"))
    assert out == "paid 5, yes"
