"""``DurableMiddleware()``: every model and tool call of a create_agent agent durable in one line."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool

import durable
from durable.integrations.langchain import DurableMiddleware, wrap_tool
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.helpers.langchain_doubles import DecidingChatModel, tool_call, tool_loop, turn
from tests.integrations.langchain.test_model import crash_then_resume

RAN: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    RAN[f"lookup-{order}"] += 1
    return f"{order}: paid 30 EUR"


@tool
async def charge(order: str) -> str:
    """Charge an order."""
    RAN[f"charge-{order}"] += 1
    return f"charged {order}"


def support(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
    """Look the order up, then charge it, then answer."""
    t = turn(messages)
    RAN[f"model-{t}"] += 1
    if t == 0:
        return AIMessage(content="", tool_calls=[tool_call("lookup", {"order": "o1"}, "call_lookup")])
    if t == 1:
        return AIMessage(content="", tool_calls=[tool_call("charge", {"order": "o1"}, "call_charge")])
    return "charged o1"


def agent(tools: list[Any] | None = None, middleware: Any = None) -> Any:
    return create_agent(
        DecidingChatModel(decide=support),
        tools if tools is not None else [lookup, charge],
        middleware=[DurableMiddleware() if middleware is None else middleware],
    )


def answer(graph: Any) -> Any:
    @durable.workflow
    async def ask(q: str) -> str:
        out = await graph.ainvoke({"messages": [("user", q)]})
        await asyncio.sleep(0)  # the last model call's receipt is written with the next commit
        return str(out["messages"][-1].content)

    return ask


def test_outside_a_run_the_agent_answers_as_without_the_middleware() -> None:
    """The middleware changes nothing outside a run: same answer, every call made."""
    plain = create_agent(DecidingChatModel(decide=support), [lookup, charge])
    durable_agent = agent()
    first = asyncio.run(plain.ainvoke({"messages": [("user", "charge o1")]}))["messages"][-1].content
    second = asyncio.run(durable_agent.ainvoke({"messages": [("user", "charge o1")]}))["messages"][-1].content
    assert first == second == "charged o1"
    assert Counter({"model-0": 2, "model-1": 2, "model-2": 2, "lookup-o1": 2, "charge-o1": 2}) == RAN


def test_every_model_and_tool_call_replays_after_a_crash(worlds: Worlds) -> None:
    """A resumed agent asks the model nothing and runs no tool: each call is recorded once."""
    out, world = crash_then_resume(worlds, answer(agent()), "charge o1")
    assert out == "charged o1"
    assert Counter({"model-0": 1, "model-1": 1, "model-2": 1, "lookup-o1": 1, "charge-o1": 1}) == RAN
    keys = [e.key for e in world.events("r") if e.type == "effect.intent"]  # type: ignore[attr-defined]
    assert "lg[model@1:pull.model].model:langchain__DecidingChatModel#0" in keys
    assert "lg[tools@2:push.0].call[call_lookup].tool:langchain__tool__lookup#0" in keys


def test_tool_options_by_name_make_a_cut_tool_run_again(worlds: Worlds) -> None:
    """DurableMiddleware(tools={"charge": {"idempotent": True}}): a crash inside charge runs it again."""
    graph = agent(middleware=DurableMiddleware(tools={"charge": {"idempotent": True}}))
    cut = worlds.crashing(lambda t, d: t == "effect.receipt" and "call_charge" in d.get("key", ""))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(answer(graph), "charge o1", world=cut, run_id="r"))
    out = asyncio.run(durable.run_workflow(answer(graph), "charge o1", world=worlds.open(), run_id="r"))
    assert out == "charged o1"
    assert (RAN["charge-o1"], RAN["lookup-o1"], RAN["model-1"]) == (2, 1, 1)


def test_a_plain_tool_cut_by_a_crash_is_not_run_again(worlds: Worlds) -> None:
    """Without options a tool is plain: the crash inside it fails the resume closed, not as a ToolMessage."""
    cut = worlds.crashing(lambda t, d: t == "effect.receipt" and "call_charge" in d.get("key", ""))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(answer(agent()), "charge o1", world=cut, run_id="r"))
    with pytest.raises(durable.UnknownCommitError, match="charge"):
        asyncio.run(durable.run_workflow(answer(agent()), "charge o1", world=worlds.open(), run_id="r"))
    assert RAN["charge-o1"] == 1


def test_a_tool_made_with_wrap_tool_keeps_its_options_and_is_recorded_once(worlds: Worlds) -> None:
    """A wrap_tool(..., idempotent=True) tool under the middleware: one intent per call, its own options."""
    graph = agent(tools=[lookup, wrap_tool(charge, idempotent=True)])
    cut = worlds.crashing(lambda t, d: t == "effect.receipt" and "call_charge" in d.get("key", ""))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(answer(graph), "charge o1", world=cut, run_id="r"))
    world = worlds.open()
    assert (
        asyncio.run(durable.run_workflow(answer(graph), "charge o1", world=world, run_id="r")) == "charged o1"
    )
    intents = [e.key for e in world.events("r") if e.type == "effect.intent" and "charge" in e.key]  # type: ignore[attr-defined]
    assert intents == ["lg[tools@4:push.0].call[call_charge].tool:langchain__tool__charge#0"]  # one record
    assert RAN["charge-o1"] == 2  # cut, then run again as idempotent


def test_unknown_tool_options_are_refused() -> None:
    """An option that is none of idempotent, reconcile, compensate is a ConfigurationError naming it."""
    with pytest.raises(durable.ConfigurationError, match="retries"):
        DurableMiddleware(tools={"charge": {"retries": 3}})


def test_a_deploy_that_changes_a_tool_fails_the_resume_closed(worlds: Worlds) -> None:
    """The agent's tools are in the run's manifest: a changed schema is a CapabilityDriftError."""

    @tool("charge")
    async def charge_v2(order: str, amount: int) -> str:
        """Charge an amount."""
        return "charged"

    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                answer(agent()),
                "charge o1",
                world=worlds.crashing(lambda t, d: t == "run.completed"),
                run_id="r",
            )
        )
    changed = agent(tools=[lookup, charge_v2])
    with pytest.raises(durable.CapabilityDriftError) as info:
        asyncio.run(durable.run_workflow(answer(changed), "charge o1", world=worlds.open(), run_id="r"))
    assert "charge tool signature changed" in str(info.value)


def test_an_interrupt_raised_in_a_tool_reaches_the_caller_not_the_model(worlds: Worlds) -> None:
    """durable.interrupt inside a tool ends the run as interrupted; the answer then reaches the tool."""

    @tool
    async def approve(order: str) -> str:
        """Ask a person to approve."""
        RAN["approve"] += 1
        return f"approved: {durable.interrupt({'order': order})}"

    def asks(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
        if turn(messages) == 0:
            return AIMessage(content="", tool_calls=[tool_call("approve", {"order": "o1"}, "call_ok")])
        return str(messages[-1].content)

    graph = create_agent(DecidingChatModel(decide=asks), [approve], middleware=[DurableMiddleware()])
    world = worlds.open()
    with pytest.raises(durable.RunInterrupted) as info:
        asyncio.run(durable.run_workflow(answer(graph), "o1", world=world, run_id="r"))
    assert info.value.value == {"order": "o1"}
    out = asyncio.run(durable.run_workflow(answer(graph), "o1", world=world, run_id="r", resume="yes"))
    assert out == "approved: yes"
    assert RAN["approve"] == 2  # asked, then answered: its recorded interrupt makes running it again safe


@pytest.mark.parametrize("graph_kind", ["create_agent", "tool_node"])
@pytest.mark.parametrize("tool_kind", ["idempotent", "plain"])
def test_a_budget_block_in_a_tool_node_reaches_the_caller_not_the_model(
    worlds: Worlds, tool_kind: str, graph_kind: str
) -> None:
    """A tool that asks a wrapped model past the run's budget: the run is blocked on the budget.

    In an agent with ``DurableMiddleware``, and in a graph whose ``ToolNode(handle_tool_errors=True)``
    runs a ``wrap_tool`` tool (it turns every Exception into an error message for the model): the
    model is never handed the refusal as a tool result, now or after the resume.

    A bigger budget then resumes it and nothing recorded is asked again. The tool stopped halfway
    has an intent and no receipt: it is called again because it is idempotent, or, plain, because
    its body recorded a call before the refused one (that call replays).
    """
    from durable.integrations.langchain import wrap

    seen: list[str] = []
    asks_twice = tool_kind == "plain"

    def expert(messages: list[BaseMessage], call: dict[str, Any]) -> str:
        RAN["expert"] += 1
        return f"expert says {messages[-1].content}"

    @tool
    async def consult(question: str) -> str:
        """Ask an expert model (twice: a question, then a follow-up)."""
        model = wrap(DecidingChatModel(decide=expert))
        if asks_twice:
            question = f"again {(await model.ainvoke(question)).content}"
        return str((await model.ainvoke(question)).content)

    def asks(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
        seen.extend(str(m.content) for m in messages if m.type == "tool")
        RAN[f"model-{turn(messages)}"] += 1
        if turn(messages) == 0:
            return AIMessage(content="", tool_calls=[tool_call("consult", {"question": "why"}, "call_x")])
        return str(messages[-1].content)

    options = {} if asks_twice else {"consult": {"idempotent": True}}
    if graph_kind == "create_agent":
        graph = create_agent(
            DecidingChatModel(decide=asks), [consult], middleware=[DurableMiddleware(tools=options)]
        )
    else:
        graph = tool_loop(asks, [wrap_tool(consult, **options.get("consult", {}))], handle_tool_errors=True)
    ask = answer(graph)
    allowed = 2 if asks_twice else 1
    expected = "expert says again expert says why" if asks_twice else "expert says why"

    async def main() -> None:
        world = worlds.open()
        h = durable.start_workflow(ask, "why", world=world, budget=durable.Budget(max_model_calls=allowed))
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=30)
        assert isinstance(blocked.value.cause, durable.BudgetExhaustedError)
        assert (await h.usage()).calls == allowed
        again = await durable.resume_run(
            h.run_id, world=world, workflows=[ask], budget=durable.Budget(max_model_calls=9)
        )
        assert await again.result(timeout=30) == expected
        assert (await h.usage()).calls == allowed + 2

    asyncio.run(main())
    assert seen == [expected]  # the model never saw the budget error as a tool result
    assert Counter({"model-0": 1, "expert": allowed, "model-1": 1}) == RAN


def test_the_agents_calls_sit_under_the_step_that_made_them_in_the_inspector(worlds: Worlds) -> None:
    """An agent run inside a @durable.step: its model and tool calls are rows below the step's row."""
    import re

    testclient = pytest.importorskip("starlette.testclient")
    from durable.ui._app import Inspector, create_app
    from durable.ui._pages import run_href

    graph = agent()

    @durable.step
    async def handle_ticket(q: str) -> str:
        out = await graph.ainvoke({"messages": [("user", q)]})
        return str(out["messages"][-1].content)

    @durable.workflow
    async def desk(q: str) -> str:
        return await handle_ticket(q)

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(desk, "charge o1", world=world, run_id="t")) == "charged o1"
    client = testclient.TestClient(
        create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787"
    )
    page = client.get(run_href("t"), headers={"Authorization": "Bearer s3cret"}).text
    rows = {
        d["data-key"]: d
        for d in (
            dict(re.findall(r'([\w-]+)="([^"]*)"', a)) for a in re.findall(r'<tr class="item" ([^>]*)>', page)
        )
    }
    assert rows["handle_ticket"]["data-depth"] == "0"
    below = {
        k: r["data-kind"]
        for k, r in rows.items()
        if k.startswith("handle_ticket.") and r["data-kind"] in ("model", "tool")
    }
    assert sorted(below.values()) == ["model", "model", "model", "tool", "tool"], rows.keys()
    assert all(int(rows[k]["data-depth"]) >= 1 for k in below)
    charge_row = next(k for k in below if "charge" in k)
    assert "charged o1" in page.split(f'data-key="{charge_row}"', 1)[1].split("</tr>", 1)[0]
