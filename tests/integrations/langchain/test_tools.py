"""``wrap_tool(tool, ...)``: LangChain tool calls recorded inside a run, keyed by their tool_call_id."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

import durable
from durable.integrations.langchain import wrap_tool
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.helpers.langchain_doubles import DecidingChatModel, tool_call, tool_loop, turn
from tests.integrations.langchain.test_model import crash_then_resume

RAN: Counter[str] = Counter()
KEYS: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    KEYS.clear()


@tool
def weather(city: str) -> str:
    """The weather in a city (a sync tool: it runs in an executor thread)."""
    RAN[f"weather-{city}"] += 1
    KEYS.append(durable.idempotency_key())
    return {"Oslo": "rain", "Lisbon": "sun"}[city]


@tool
async def charge(order: str) -> str:
    """Charge an order (an async tool)."""
    RAN[f"charge-{order}"] += 1
    KEYS.append(durable.idempotency_key())
    return f"charged {order}"


@tool
def broken(city: str) -> str:
    """A tool that fails."""
    RAN["broken"] += 1
    raise ValueError(f"no weather for {city}")


def two_cities(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
    """Turn 0 asks for two tools at once; then the model answers from their results."""
    if turn(messages) == 0:
        function = call["tools"][0]["function"]
        arg = next(iter(function["parameters"]["properties"]))
        return AIMessage(
            content="",
            tool_calls=[tool_call(function["name"], {arg: c}, f"call_{c}") for c in ("Oslo", "Lisbon")],
        )
    return " / ".join(str(m.content) for m in messages if isinstance(m, ToolMessage))


def agent_graph(tools: list[Any], *, handle_tool_errors: Any = True) -> Any:
    """The tool loop over ``two_cities``: two tool calls at once, then the answer."""
    return tool_loop(two_cities, tools, handle_tool_errors=handle_tool_errors)


def asking(graph: Any) -> Any:
    """A workflow that sends its question through ``graph`` and returns the last message."""

    @durable.workflow
    async def ask(q: str) -> str:
        out = await graph.ainvoke({"messages": [HumanMessage(q)]})
        await asyncio.sleep(0)  # the last model call's receipt is written with the next commit
        return str(out["messages"][-1].content)

    return ask


def test_outside_a_run_a_wrapped_tool_runs_as_before() -> None:
    """Plain arguments give the content, a tool call a ToolMessage: as without wrap_tool."""
    wrapped = wrap_tool(weather, idempotent=True)
    assert wrapped.invoke({"city": "Oslo"}) == "rain"
    message = wrapped.invoke(tool_call("weather", {"city": "Lisbon"}, "c9"))
    assert isinstance(message, ToolMessage) and (message.content, message.tool_call_id) == ("sun", "c9")
    assert wrap_tool(wrapped) is wrapped


def test_wrap_tool_refuses_what_is_no_tool() -> None:
    """A chat model handed to wrap_tool() is refused with the advice to use wrap()."""
    with pytest.raises(durable.ConfigurationError, match=r"wrap\(\)"):
        wrap_tool(DecidingChatModel(decide=two_cities))


def test_tool_calls_of_one_turn_run_at_once_keyed_by_their_ids_and_replay(worlds: Worlds) -> None:
    """A tool node's two calls: each runs once, in call[<tool_call_id>] of its task; the resume replays."""
    graph = agent_graph([wrap_tool(weather, idempotent=True)])

    trip = asking(graph)

    out, world = crash_then_resume(worlds, trip, "pack?")
    assert out == "rain / sun"
    assert Counter({"weather-Oslo": 1, "weather-Lisbon": 1}) == RAN
    keys = {e.key for e in world.events("r") if e.type == "effect.receipt"}  # type: ignore[attr-defined]
    assert "lg[tools@2:pull.tools].call[call_Oslo].tool:langchain__tool__weather#0" in keys
    assert sorted(KEYS) == sorted(f"r:{k}" for k in keys if "tool:langchain__tool__weather" in k)


def test_idempotency_key_is_the_same_in_the_tool_after_a_crash_cut_it(worlds: Worlds) -> None:
    """An idempotent tool cut by a crash runs again with the idempotency key it had the first time."""
    graph = agent_graph([wrap_tool(charge, idempotent=True)])

    pay = asking(graph)

    cut = worlds.crashing(lambda t, d: t == "effect.receipt" and "call_Lisbon" in d.get("key", ""))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(pay, "pay", world=cut, run_id="r"))
    out = asyncio.run(durable.run_workflow(pay, "pay", world=worlds.open(), run_id="r"))
    assert out == "charged Oslo / charged Lisbon"
    assert RAN["charge-Lisbon"] == 2
    lisbon = [k for k in KEYS if "call_Lisbon" in k]
    assert len(lisbon) == 2 and lisbon[0] == lisbon[1]


def test_a_plain_tool_cut_by_a_crash_raises_unknown_commit_not_an_error_message(worlds: Worlds) -> None:
    """A plain tool cut by a crash, handle_tool_errors=True around it: UnknownCommitError on resume."""
    graph = agent_graph([wrap_tool(charge)], handle_tool_errors=True)

    pay = asking(graph)

    cut = worlds.crashing(lambda t, d: t == "effect.receipt" and "call_Oslo" in d.get("key", ""))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(pay, "pay", world=cut, run_id="r"))
    with pytest.raises(durable.UnknownCommitError, match="call_Oslo"):
        asyncio.run(durable.run_workflow(pay, "pay", world=worlds.open(), run_id="r"))
    assert RAN["charge-Oslo"] == 1


def test_reconcile_says_whether_a_cut_call_happened(worlds: Worlds) -> None:
    """A cut tool with reconcile=: its answer is the call's result, and the tool is not called again."""
    asked: list[dict[str, Any]] = []

    def happened(key: str, call: dict[str, Any]) -> str:
        asked.append(call)
        return f"charged {call['args']['order']} (found)"

    paid = wrap_tool(charge, reconcile=happened)

    @durable.workflow
    async def pay(order: str) -> str:
        out = await paid.ainvoke(tool_call("charge", {"order": order}, "c1"))
        return str(out.content)

    cut = worlds.crashing(lambda t, d: t == "effect.receipt")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(pay, "o1", world=cut, run_id="r"))
    assert (
        asyncio.run(durable.run_workflow(pay, "o1", world=worlds.open(), run_id="r")) == "charged o1 (found)"
    )
    assert asked == [{"tool": "charge", "args": {"order": "o1"}}]
    assert RAN["charge-o1"] == 1


def test_compensate_undoes_a_confirmed_call_when_the_run_fails(worlds: Worlds) -> None:
    """compensate= runs for each confirmed call, given its arguments and result, when the run fails."""
    undone: list[tuple[str, str]] = []

    async def refund(order: str, result: str) -> None:
        undone.append((order, result))

    paid = wrap_tool(charge, idempotent=True, compensate=refund)

    @durable.workflow
    async def pay(order: str) -> str:
        await paid.ainvoke({"order": order})
        raise durable.NonRetryableError("no courier")

    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(pay, "o2", world=worlds.open(), run_id="r"))
    assert undone == [("o2", "charged o2")]


def test_a_tool_that_raises_becomes_the_error_message_it_made_and_replays(worlds: Worlds) -> None:
    """With handle_tool_errors=True a failing tool's error ToolMessage is its recorded result."""
    graph = agent_graph([wrap_tool(broken)])

    trip = asking(graph)

    out, _ = crash_then_resume(worlds, trip, "pack?")
    assert out.startswith("Error: ValueError('no weather for Oslo')")
    assert RAN["broken"] == 2  # once per call (Oslo, Lisbon), never again on the resume


def test_a_tool_that_raises_without_a_handler_fails_the_run_with_its_own_error(worlds: Worlds) -> None:
    """Without handle_tool_errors the tool's own exception is recorded and ends the run, as its type."""
    graph = agent_graph([wrap_tool(broken)], handle_tool_errors=False)

    trip = asking(graph)

    world = worlds.open()
    with pytest.raises(ValueError, match="no weather"):
        asyncio.run(durable.run_workflow(trip, "pack?", world=world, run_id="r"))
    with pytest.raises(ValueError, match="no weather"):
        asyncio.run(durable.run_workflow(trip, "pack?", world=worlds.open(), run_id="r"))
    assert RAN["broken"] == 2


@tool
def handoff(city: str) -> Command:  # type: ignore[type-arg]
    """Hand the conversation over (returns a LangGraph Command)."""
    RAN[f"handoff-{city}"] += 1
    return Command(update={"messages": [ToolMessage(content=f"to {city}", tool_call_id=f"call_{city}")]})


def test_a_tool_that_returns_a_command_replays_the_command(worlds: Worlds) -> None:
    """A Command with messages in its update is recorded and handed back to the tool node as such."""
    graph = agent_graph([wrap_tool(handoff)])

    trip = asking(graph)

    out, _ = crash_then_resume(worlds, trip, "pack?")
    assert out == "to Oslo / to Lisbon"
    assert Counter({"handoff-Oslo": 1, "handoff-Lisbon": 1}) == RAN


def test_a_changed_tool_schema_fails_the_resume_closed(worlds: Worlds) -> None:
    """A deploy whose wrapped tool takes other arguments: the resume raises CapabilityDriftError naming it."""

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return "found"

    @tool("lookup")
    def lookup_v2(order: str, region: str) -> str:
        """Look an order up in a region."""
        return "found"

    current = {"tool": wrap_tool(lookup)}

    @durable.workflow
    async def find(order: str) -> str:
        out = await current["tool"].ainvoke(tool_call("lookup", {"order": order, "region": "eu"}, "c1"))
        return str(out.content)

    cut = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(find, "o1", world=cut, run_id="r"))
    current["tool"] = wrap_tool(lookup_v2)
    with pytest.raises(durable.CapabilityDriftError, match="lookup") as info:
        asyncio.run(durable.run_workflow(find, "o1", world=worlds.open(), run_id="r"))
    assert "signature" in str(info.value)
