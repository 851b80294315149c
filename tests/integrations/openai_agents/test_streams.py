"""Streamed agent runs inside a workflow: live events the first time, the recorded events on a resume."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent
from agents.testing import ScriptedModel, assistant_message, function_call

import durable
from durable.integrations.openai_agents import DurableRunner
from durable.testing import run_replaying_always
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on
from tests.helpers.openai_agents_kit import ANSWER, Deciding, outputs, refund_desk, support_desk


class Calls(Counter[str]):
    async def __call__(self, name: str) -> None:
        self[name] += 1


async def drained(result: Any) -> list[str]:
    """Every event of a streamed run, as its type (a raw event as the Responses event's type)."""
    kinds = []
    async for event in result.stream_events():
        kinds.append(event.data.type if event.type == "raw_response_event" else event.type)
    return kinds


def test_the_first_delta_reaches_the_caller_before_the_model_s_response_ends(worlds: Worlds) -> None:
    """The model holds its stream open after the first delta until the caller has seen that delta."""
    seen = asyncio.Event()

    class Holding(Deciding):
        async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
            async for event in ScriptedModel([[assistant_message("hello there")]]).stream_response(
                *args, **kwargs
            ):
                yield event
                if event.type == "response.output_text.delta":
                    await asyncio.wait_for(seen.wait(), 10)  # only the caller can end this wait

    agent = Agent(name="greeter", model=Holding("greeter", lambda c: None, Calls()))

    @durable.workflow
    async def greet() -> list[Any]:
        seen.clear()
        result = DurableRunner.run_streamed(agent, "hi")
        deltas = []
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
                deltas.append(event.data.delta)
                seen.set()
        return [deltas, result.final_output]

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(greet, world=world, run_id="r")) == [
        ["hello there"],
        "hello there",
    ]
    cursors = [e for e in world.events("r") if e.type == "stream.cursor"]
    assert cursors
    assert asyncio.run(durable.run_workflow(greet, world=worlds.open(), run_id="r"))[1] == "hello there"


def test_a_resumed_streamed_run_yields_the_recorded_events_and_the_same_output(worlds: Worlds) -> None:
    """Killed before the lookups, the resumed stream yields what an uncut one does; replayed calls run not."""
    plain_calls, calls = Calls(), Calls()
    plain_triage, _, _ = support_desk(plain_calls)
    triage, _, _ = support_desk(calls)

    def stream(agent: Any) -> Any:
        @durable.workflow(name="support")
        async def support() -> list[Any]:
            result = DurableRunner.run_streamed(agent, "where are A1 and B2?")
            return [await drained(result), result.final_output]

        return support

    uncut = asyncio.run(durable.run_workflow(stream(plain_triage), world=worlds.open(), run_id="uncut"))
    crashing = worlds.crashing(on("effect.intent", "lookup_order"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(stream(triage), world=crashing, run_id="r"))
    before = Counter(calls)
    resumed = asyncio.run(durable.run_workflow(stream(triage), world=worlds.open(), run_id="r"))
    assert resumed == uncut
    assert resumed[1].startswith(ANSWER)
    assert calls - before == Counter({"lookup-A1": 1, "lookup-B2": 1, "model-billing-3": 1})


def test_a_streamed_run_waits_for_approvals_and_streams_on_after_the_answer(worlds: Worlds) -> None:
    """The stream stops at the interrupt; answered, the same result object streams on to the final output."""
    calls = Calls()
    agent = refund_desk(calls)

    @durable.workflow
    async def refunds() -> list[Any]:
        result = DurableRunner.run_streamed(agent, "refund both")
        kinds = await drained(result)
        return [kinds.count("response.completed"), result.final_output, result.is_complete]

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r"))
    out = asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r", resume=True))
    assert out == [2, "refunded 5 on A1 | refunded 7 on B2", True]
    assert calls == Counter({"model-refunds-0": 1, "refund-A1": 1, "refund-B2": 1, "model-refunds-2": 1})


def test_an_agent_used_as_a_tool_that_streams_records_its_calls_below_the_call(worlds: Worlds) -> None:
    """``as_tool(on_stream=...)`` streams the nested agent: its calls go below the tool call and replay."""
    calls = Calls()
    _, billing, _ = support_desk(calls)
    streamed: list[str] = []

    async def on_stream(event: Any) -> None:
        streamed.append(event["event"].type)

    ask = billing.as_tool(tool_name="ask_billing", tool_description="Ask billing.", on_stream=on_stream)

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("ask_billing", {"input": "where?"}, call_id="b1")]
        return [assistant_message("boss: " + outputs(call)[0]["output"])]

    boss = Agent(name="boss", model=Deciding("boss", decide, calls), tools=[ask])

    @durable.workflow
    async def delegate() -> str:
        return str((await DurableRunner.run(boss, "go")).final_output)

    world = worlds.open()
    out = asyncio.run(durable.run_workflow(delegate, world=world, run_id="r"))
    assert out.startswith("boss: " + ANSWER)
    assert "raw_response_event" in streamed
    nested = "session:boss#0.turn-0[0].tool:openai_agents__tool__ask_billing#0.session:billing#0"
    assert any(e.type == "stream.cursor" and e.key.startswith(nested) for e in world.events("r"))  # type: ignore[attr-defined]
    assert asyncio.run(run_replaying_always(delegate, world=worlds.open())).output == out
