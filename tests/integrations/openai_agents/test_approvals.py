"""Tools that need approval: the run waits at ``durable.interrupt`` until an answer approves or rejects."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent
from agents.run_internal.items import REJECTION_MESSAGE
from agents.testing import assistant_message, function_call

import durable
from durable.integrations.openai_agents import DurableRunner
from tests.conftest import Worlds
from tests.helpers.openai_agents_kit import Deciding, outputs, refund_desk


class Calls(Counter[str]):
    async def __call__(self, name: str) -> None:
        self[name] += 1


def workflow(calls: Calls) -> Any:
    agent = refund_desk(calls)

    @durable.workflow
    async def refunds() -> str:
        return str((await DurableRunner.run(agent, "refund both")).final_output)

    return refunds


def asked(world: durable.World, wf: Any, answer: Any = None, *, first: bool = False) -> dict[str, Any]:
    """Run (or answer) the run until it waits again; the value it waits with."""
    kwargs: dict[str, Any] = {} if first else {"resume": answer}
    with pytest.raises(durable.RunInterrupted) as waiting:
        asyncio.run(durable.run_workflow(wf, world=world, run_id="r", **kwargs))
    value: dict[str, Any] = waiting.value.value
    return value


def test_the_interrupt_names_each_pending_call_and_true_approves_them_all(worlds: Worlds) -> None:
    """The value lists call id, tool, arguments and agent; ``True`` runs both refunds, once each."""
    calls = Calls()
    wf = workflow(calls)
    value = asked(worlds.open(), wf, first=True)
    assert value == {
        "kind": "openai_agents.approval",
        "agent": "refunds",
        "approvals": [
            {
                "call_id": "r1",
                "tool": "refund",
                "arguments": {"order_id": "A1", "amount": 5},
                "agent": "refunds",
            },
            {
                "call_id": "r2",
                "tool": "refund",
                "arguments": {"order_id": "B2", "amount": 7},
                "agent": "refunds",
            },
        ],
    }
    out = asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="r", resume=True))
    assert out == "refunded 5 on A1 | refunded 7 on B2"
    assert calls == Counter({"model-refunds-0": 1, "refund-A1": 1, "refund-B2": 1, "model-refunds-2": 1})


def test_false_rejects_them_all_and_the_sdk_s_rejection_reaches_the_model(worlds: Worlds) -> None:
    """``False``: no refund runs; the model reads the SDK's rejection message for each call."""
    calls = Calls()
    wf = workflow(calls)
    asked(worlds.open(), wf, first=True)
    out = asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="r", resume=False))
    assert out == f"{REJECTION_MESSAGE} | {REJECTION_MESSAGE}"
    assert calls["refund-A1"] == calls["refund-B2"] == 0


def test_a_dict_answers_each_call_and_calls_it_leaves_out_are_asked_again(worlds: Worlds) -> None:
    """``{"r1": True}`` approves r1 and asks again for r2 alone; a message rejects with its own words."""
    calls = Calls()
    wf = workflow(calls)
    asked(worlds.open(), wf, first=True)
    again = asked(worlds.open(), wf, {"r1": True})
    assert [a["call_id"] for a in again["approvals"]] == ["r2"]
    out = asyncio.run(
        durable.run_workflow(
            wf,
            world=worlds.open(),
            run_id="r",
            resume={"r2": {"approve": False, "message": "over the limit"}},
        )
    )
    assert out == "refunded 5 on A1 | over the limit"
    assert calls == Counter({"model-refunds-0": 1, "refund-A1": 1, "model-refunds-2": 1})


def test_an_answer_of_another_shape_is_asked_again_with_the_problem(worlds: Worlds) -> None:
    """A typo (``"yes"``) or an unknown call id neither fails the run nor approves anything: it asks again."""
    calls = Calls()
    wf = workflow(calls)
    asked(worlds.open(), wf, first=True)
    again = asked(worlds.open(), wf, "yes")
    assert "answer True" in again["problem"]
    assert len(again["approvals"]) == 2
    again = asked(worlds.open(), wf, {"r1": True, "r9": True})
    assert "['r9'] that are not pending" in again["problem"]
    assert calls["refund-A1"] == 0
    out = asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="r", resume=True))
    assert out == "refunded 5 on A1 | refunded 7 on B2"


def test_an_agent_used_as_a_tool_asks_for_its_approvals_at_its_own_place(worlds: Worlds) -> None:
    """A nested run's pending refunds make the run wait inside the tool call; answered, each runs once."""
    calls = Calls()
    ask = refund_desk(calls).as_tool(tool_name="ask_refunds", tool_description="Ask the refund desk.")

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("ask_refunds", {"input": "refund both"}, call_id="b1")]
        return [assistant_message("boss: " + outputs(call)[0]["output"])]

    boss = Agent(name="boss", model=Deciding("boss", decide, calls), tools=[ask])

    @durable.workflow
    async def delegate() -> str:
        return str((await DurableRunner.run(boss, "go")).final_output)

    with pytest.raises(durable.RunInterrupted) as waiting:
        asyncio.run(durable.run_workflow(delegate, world=worlds.open(), run_id="r"))
    assert waiting.value.path == (
        "session:boss#0.turn-0[0].tool:openai_agents__tool__ask_refunds#0.session:refunds#0.interrupt#1"
    )
    out = asyncio.run(durable.run_workflow(delegate, world=worlds.open(), run_id="r", resume=True))
    assert out == "boss: refunded 5 on A1 | refunded 7 on B2"
    once = ("model-boss-0", "model-refunds-0", "refund-A1", "refund-B2", "model-refunds-2", "model-boss-1")
    assert calls == Counter(once)
