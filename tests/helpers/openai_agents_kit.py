"""Agents for the OpenAI Agents SDK integration tests: a support desk whose models decide from their input.

A model here answers from the request it gets, never from how many calls it
served, so a process that resumes a killed run answers a re-sent request as
the first process would have. Every model and tool body calls ``ran(name)``
first: the tests count real calls with it (in a list, or in a file across
processes) and stop a child process there.

The desk: ``triage`` hands off to ``billing``; billing asks for two orders at
once (two ``lookup_order`` calls in one response), then answers. Model calls
are named ``model-<agent>-<n>``, ``n`` the tool outputs the request holds:
``model-triage-0``, ``model-billing-1`` (after the handoff), ``model-billing-3``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agents import Agent, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage

Ran = Callable[[str], Awaitable[None]]
Decide = Callable[[Any], Any]

ANSWER = "A1 shipped; B2 is on its way"


def outputs(call: Any) -> list[dict[str, Any]]:
    """The tool (and handoff) outputs a model request holds, in order."""
    items = call.input if isinstance(call.input, list) else []
    return [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def asked(call: Any) -> list[str]:
    """The names of the function calls a model request holds (the model's earlier asks)."""
    items = call.input if isinstance(call.input, list) else []
    return [i["name"] for i in items if isinstance(i, dict) and i.get("type") == "function_call"]


class Deciding(Model):
    """A ``Model`` that decides each response from its input, through the SDK's ``ScriptedModel``."""

    def __init__(self, agent: str, decide: Decide, ran: Ran, *, usage: Usage | None = None) -> None:
        self.agent = agent
        self.decide = decide
        self.ran = ran
        self.usage = usage

    def _script(self) -> ScriptedModel:
        return ScriptedModel([ModelStep.respond(self.decide)], default_usage=self.usage)

    def _name(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        items = kwargs.get("input", args[1] if len(args) > 1 else [])
        done = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        return f"model-{self.agent}-{len(done)}"

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        await self.ran(self._name(args, kwargs))
        return await self._script().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        await self.ran(self._name(args, kwargs))
        async for event in self._script().stream_response(*args, **kwargs):
            yield event


def triage_decides(call: Any) -> Any:
    """Hand off to billing."""
    return [function_call("transfer_to_billing", {}, call_id="h1")]


def billing_decides(call: Any) -> Any:
    """Look up two orders at once, then answer from what the lookups said."""
    if "lookup_order" not in asked(call):
        return ModelStep(
            output=[
                function_call("lookup_order", {"order_id": "A1"}, call_id="c1"),
                function_call("lookup_order", {"order_id": "B2"}, call_id="c2"),
            ],
            usage=Usage(requests=1, input_tokens=30, output_tokens=5),
        )
    said = " / ".join(o["output"] for o in outputs(call) if o["call_id"] in ("c1", "c2"))
    usage = Usage(requests=1, input_tokens=40, output_tokens=7)
    return ModelStep(output=[assistant_message(f"{ANSWER} ({said})")], usage=usage)


def support_desk(ran: Ran, *, idempotent: bool = True) -> tuple[Agent[Any], Agent[Any], Any]:
    """``(triage, billing, lookup_order)``: triage hands off to billing, which looks orders up."""
    from durable.integrations.openai_agents import tool_options

    @function_tool
    async def lookup_order(order_id: str) -> str:
        """Where an order is."""
        await ran(f"lookup-{order_id}")
        return {"A1": "A1 shipped", "B2": "B2 in transit"}[order_id]

    if idempotent:
        tool_options(lookup_order, idempotent=True)
    usage = Usage(requests=1, input_tokens=10, output_tokens=2)
    billing = Agent(
        name="billing",
        instructions="You answer billing questions.",
        model=Deciding("billing", billing_decides, ran),
        tools=[lookup_order],
    )
    triage = Agent(
        name="triage",
        instructions="You route customers.",
        model=Deciding("triage", triage_decides, ran, usage=usage),
        handoffs=[billing],
    )
    return triage, billing, lookup_order


def charging_desk(ran: Ran, *, idempotent: bool, keys: list[str] | None = None) -> Agent[Any]:
    """An agent that charges a card once, then confirms: ``charge`` is a plain or an idempotent tool."""
    import durable
    from durable.integrations.openai_agents import tool_options

    @function_tool
    async def charge(amount: int) -> str:
        """Charge the customer's card."""
        if keys is not None:
            keys.append(durable.idempotency_key())
        await ran("charge")
        return f"charged {amount}"

    if idempotent:
        tool_options(charge, idempotent=True)

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("charge", {"amount": 20}, call_id="pay")]
        return [assistant_message(outputs(call)[0]["output"])]

    model = Deciding("cashier", decide, ran)
    return Agent(name="cashier", instructions="Charge once.", model=model, tools=[charge])


def refund_desk(ran: Ran) -> Agent[Any]:
    """An agent that asks for two refunds at once; the refund tool needs approval."""

    @function_tool(needs_approval=True)
    async def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        await ran(f"refund-{order_id}")
        return f"refunded {amount} on {order_id}"

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [
                function_call("refund", {"order_id": "A1", "amount": 5}, call_id="r1"),
                function_call("refund", {"order_id": "B2", "amount": 7}, call_id="r2"),
            ]
        return [assistant_message(" | ".join(o["output"] for o in outputs(call)))]

    model = Deciding("refunds", decide, ran)
    return Agent(name="refunds", instructions="Refund orders.", model=model, tools=[refund])


def boss_desk(ran: Ran) -> Agent[Any]:
    """An agent that asks the billing desk (an agent used as a tool), then answers."""
    _, billing, _ = support_desk(ran)

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("ask_billing", {"input": "where are A1 and B2?"}, call_id="b1")]
        return [assistant_message("billing says: " + outputs(call)[0]["output"])]

    ask = billing.as_tool(tool_name="ask_billing", tool_description="Ask the billing desk.")
    return Agent(name="boss", instructions="Delegate.", model=Deciding("boss", decide, ran), tools=[ask])


def dumps(value: Any) -> str:
    """One line of JSON (what a child process prints last)."""
    return json.dumps(value, sort_keys=True)
