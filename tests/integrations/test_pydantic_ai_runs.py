"""The pydantic-ai capability on the other ways agents run: streams, MCP, iter, sub-agents, clients."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import durable
from durable.integrations.pydantic_ai import Durability
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.integrations.test_pydantic_ai import ROOT, Support, crash_then_resume, intents, returns


def test_a_streamed_run_replays_its_events(worlds: Worlds) -> None:
    """run_stream inside a run: the resumed run streams the same text and events, without the model."""
    streamed: Counter[str] = Counter()
    seen: list[list[str]] = []

    async def stream_model(messages: list[ModelMessage], info: AgentInfo) -> Any:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        streamed[f"stream-{turn}"] += 1
        if turn == 0:
            yield {0: DeltaToolCall("echo", '{"text": "hi"}', tool_call_id="e1")}
            return
        for word in ["the ", "echo ", "said ", "hi"]:
            yield word

    def echo(text: str) -> str:
        """Echo the text."""
        streamed["echo"] += 1
        return text

    async def handler(ctx: Any, events: Any) -> None:
        async for event in events:
            if isinstance(event, PartStartEvent | PartDeltaEvent):
                seen[-1].append(type(event).__name__)

    agent = Agent(
        FunctionModel(stream_function=stream_model),
        name="echoer",
        toolsets=[FunctionToolset([echo], id="echo")],
        capabilities=[Durability(event_stream_handler=handler)],
    )

    @durable.workflow
    async def echo_wf(q: str) -> str:
        seen.append([])
        async with agent.run_stream(q) as run:
            return "".join([chunk async for chunk in run.stream_text(delta=True)])

    assert crash_then_resume(worlds, echo_wf, "q") == "the echo said hi"
    assert streamed == Counter({"stream-0": 1, "echo": 1, "stream-1": 1})
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0]


def test_mcp_tool_listing_and_calls_are_recorded(worlds: Worlds, tmp_path: Path) -> None:
    """An MCP server's get_tools and call_tool are durable calls: a resume reaches the server no more."""
    pytest.importorskip("fastmcp")
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    counts = tmp_path / "mcp-calls.log"
    server = StdioTransport(
        command=sys.executable, args=[str(ROOT / "cookbook" / "_notes_mcp_server.py"), str(counts)]
    )
    listed: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            listed.append(sorted(t.name for t in info.function_tools))
            return ModelResponse(parts=[ToolCallPart("read_note", {"city": "Oslo"}, tool_call_id="n1")])
        return ModelResponse(parts=[TextPart(str(returns(messages)["read_note"]))])

    agent = Agent(
        FunctionModel(model),
        name="trip",
        toolsets=[MCPToolset(server, id="notes")],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def trip(q: str) -> str:
        return (await agent.run(q)).output

    assert crash_then_resume(worlds, trip, "q") == "Pack an umbrella: it rains in Oslo."
    assert counts.read_text().split() == ["read_note"]
    assert listed == [["read_note", "save_note"]]
    keys = intents(worlds.open())
    assert "session:trip#0.tools-1[notes].tool:trip__mcp_server__notes__get_tools#0" in keys
    assert "session:trip#0.turn-1[n1].tool:trip__mcp_server__notes__call_tool__read_note#0" in keys


def test_test_model_agent_runs_and_replays(worlds: Worlds) -> None:
    """pydantic-ai's TestModel agent (every tool called once) gives the same output on resume."""
    used: Counter[str] = Counter()

    def weather(city: str) -> str:
        """The weather in a city."""
        used["weather"] += 1
        return "rain"

    agent = Agent(
        TestModel(), name="t", toolsets=[FunctionToolset([weather], id="w")], capabilities=[Durability()]
    )

    @durable.workflow
    async def t_wf(q: str) -> str:
        return (await agent.run(q)).output

    assert crash_then_resume(worlds, t_wf, "q") == '{"weather":"rain"}'
    assert used == Counter({"weather": 1})


def test_agent_iter_inside_a_run_replays(worlds: Worlds) -> None:
    """Driving the agent node by node with agent.iter replays as agent.run does."""
    support = Support()

    @durable.workflow
    async def iterated(q: str) -> list[str]:
        nodes = []
        async with support.agent.iter(q) as run:
            async for node in run:
                nodes.append(type(node).__name__)
        assert run.result is not None
        return [*nodes, run.result.output]

    out = crash_then_resume(worlds, iterated, "q")
    assert out[-1] == "at the Oslo depot, tomorrow" and "CallToolsNode" in out
    assert support.calls == Counter(
        {"model-0": 1, "find_order": 1, "model-1": 1, "track_parcel": 1, "carrier_eta": 1, "model-2": 1}
    )


def _delegation(calls: Counter[str]) -> Any:
    """A lead agent whose tool ask_expert runs an expert agent (two model requests, one tool)."""

    def inner_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        calls[f"inner-model-{turn}"] += 1
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart("look_up", {"q": "x"}, tool_call_id="k1")])
        return ModelResponse(parts=[TextPart(f"expert says {returns(messages)['look_up']}")])

    def look_up(q: str) -> str:
        """Look something up."""
        calls["look_up"] += 1
        return "42"

    expert = Agent(
        FunctionModel(inner_model),
        name="expert",
        toolsets=[FunctionToolset([look_up], id="books")],
        capabilities=[Durability()],
    )

    async def ask_expert(question: str) -> str:
        """Ask the expert agent."""
        calls["ask_expert"] += 1
        return (await expert.run(question)).output

    def outer_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            calls["lead-model-0"] += 1
            return ModelResponse(parts=[ToolCallPart("ask_expert", {"question": "?"}, tool_call_id="x1")])
        calls["lead-model-1"] += 1
        return ModelResponse(parts=[TextPart(str(returns(messages)["ask_expert"]))])

    lead = Agent(
        FunctionModel(outer_model),
        name="lead",
        toolsets=[FunctionToolset([ask_expert], id="team")],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def delegate(q: str) -> str:
        return (await lead.run(q)).output

    return delegate


TOOL_KEY = "session:lead#0.turn-1[x1].tool:lead__function_toolset__team__call_tool__ask_expert#0"


def test_a_delegate_agent_records_its_calls_in_the_tool_call_s_own_scope(worlds: Worlds) -> None:
    """An agent run inside a tool of another agent records its model and tool calls below that tool call."""
    calls: Counter[str] = Counter()
    assert crash_then_resume(worlds, _delegation(calls), "q") == "expert says 42"
    assert calls == Counter(
        {
            "lead-model-0": 1,
            "ask_expert": 1,
            "inner-model-0": 1,
            "look_up": 1,
            "inner-model-1": 1,
            "lead-model-1": 1,
        }
    )
    inner = f"{TOOL_KEY}.session:expert#0"
    assert [k for k in intents(worlds.open()) if k.startswith(TOOL_KEY + ".")] == [
        f"{inner}.model:expert__model_request#0",
        f"{inner}.turn-1[k1].tool:expert__function_toolset__books__call_tool__look_up#0",
        f"{inner}.model:expert__model_request#1",
    ]


def test_a_crash_in_a_delegate_s_second_request_runs_only_that_request_again(worlds: Worlds) -> None:
    """Cut in the delegate's second model request, the resume calls the tool again; only that request runs."""
    calls: Counter[str] = Counter()
    delegate = _delegation(calls)
    inner_second = lambda t, d: t == "effect.receipt" and d["key"].endswith("expert__model_request#1")  # noqa: E731
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(delegate, "q", world=worlds.crashing(inner_second), run_id="r"))
    assert (
        asyncio.run(durable.run_workflow(delegate, "q", world=worlds.open(), run_id="r")) == "expert says 42"
    )
    assert calls == Counter(
        {
            "lead-model-0": 1,
            "ask_expert": 2,
            "inner-model-0": 1,
            "look_up": 1,
            "inner-model-1": 2,
            "lead-model-1": 1,
        }
    )


def test_an_agent_on_a_wrapped_openai_client_records_each_request_once(worlds: Worlds) -> None:
    """A Durability agent whose model uses a wrapped openai client: the agent's request is the record."""
    # pydantic-ai's own lower bound for openai can be above ours: then its OpenAI model does not import
    pytest.importorskip("pydantic_ai.models.openai", exc_type=ImportError)
    from _scripted_api import Reply, ScriptedAPI
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from durable.integrations.openai import wrap

    box: dict[str, Any] = {}

    @durable.workflow
    async def chat(q: str) -> str:
        return (await box["agent"].run(q)).output

    with ScriptedAPI(lambda request: Reply(text="hello from the api")) as api:

        def attempt(world: durable.World) -> str:
            async def go() -> str:
                client = wrap(AsyncOpenAI(base_url=api.url + "/v1", api_key="offline", max_retries=0))
                model = OpenAIChatModel("gpt-x", provider=OpenAIProvider(openai_client=client))
                box["agent"] = Agent(model, name="chat", capabilities=[Durability()])
                try:
                    return str(await durable.run_workflow(chat, "q", world=world, run_id="r"))
                finally:
                    await client.close()

            return asyncio.run(go())

        with pytest.raises(SimulatedCrash):
            attempt(worlds.crashing(lambda t, d: t == "run.completed"))
        assert attempt(worlds.open()) == "hello from the api"
        assert len(api.requests) == 1


def test_a_toolset_given_at_run_time_is_refused_inside_a_run(world: durable.World) -> None:
    """run(toolsets=[...]) inside a run fails before any call: its tools would not be recorded."""
    support = Support()

    def extra(x: int) -> int:
        """Not registered with the agent."""
        return x

    @durable.workflow
    async def with_extra(q: str) -> str:
        return (await support.agent.run(q, toolsets=[FunctionToolset([extra], id="extra")])).output

    with pytest.raises(UserError, match="cannot be added at runtime"):
        asyncio.run(durable.run_workflow(with_extra, "q", world=world, run_id="r"))
    assert support.calls == Counter()
