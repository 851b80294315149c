"""The pydantic-ai capability: recorded model requests and tool calls, replay, drift, transparency."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    FunctionToolset,
    ModelRetry,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import durable
from durable.integrations.pydantic_ai import Durability, tool_options
from durable.testing import SimulatedCrash
from tests.conftest import Worlds

ROOT = Path(__file__).resolve().parents[2]


def returns(messages: list[ModelMessage]) -> dict[str, Any]:
    return {p.tool_name: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}


class Support:
    """A support agent with two parallel tool calls in its second turn; counts every real call."""

    def __init__(
        self,
        *,
        lookup_name: str = "find_order",
        metadata: dict[str, Any] | None = None,
        name: str = "support",
    ) -> None:
        self.calls: Counter[str] = Counter()
        self.lookup_name = lookup_name

        def find_order(order_id: str) -> dict[str, str]:
            """Find an order by id."""
            self.calls["find_order"] += 1
            return {"tracking_id": "TRK-88", "carrier": "Posten"}

        async def track_parcel(tracking_id: str) -> str:
            """Where a parcel is."""
            self.calls["track_parcel"] += 1
            await asyncio.sleep(0)  # lets the two calls of the turn interleave
            return "at the Oslo depot"

        async def carrier_eta(carrier: str) -> str:
            """When the carrier delivers."""
            self.calls["carrier_eta"] += 1
            return "tomorrow"

        find_order.__name__ = lookup_name
        toolset: FunctionToolset[None] = FunctionToolset(id="orders")
        toolset.add_function(find_order, metadata=metadata)
        toolset.add_function(track_parcel)
        toolset.add_function(carrier_eta)
        self.agent = Agent(
            FunctionModel(self.model), name=name, toolsets=[toolset], capabilities=[Durability()]
        )

    async def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        self.calls[f"model-{turn}"] += 1
        got = returns(messages)
        if turn == 0:
            return ModelResponse(
                parts=[ToolCallPart(self.lookup_name, {"order_id": "1234"}, tool_call_id="c_order")]
            )
        if turn == 1:
            order = got[self.lookup_name]
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        "track_parcel", {"tracking_id": order["tracking_id"]}, tool_call_id="c_track"
                    ),
                    ToolCallPart("carrier_eta", {"carrier": order["carrier"]}, tool_call_id="c_eta"),
                ]
            )
        return ModelResponse(parts=[TextPart(f"{got['track_parcel']}, {got['carrier_eta']}")])

    def workflow(self) -> Any:
        @durable.workflow(name="support_wf")
        async def support_wf(question: str) -> str:
            return (await self.agent.run(question)).output

        return support_wf


def crash_then_resume(worlds: Worlds, wf: Any, inp: Any, *, before: str = "run.completed", **kw: Any) -> Any:
    """Run until the event ``before`` would be written (the process 'dies'), then resume."""
    crashing = worlds.crashing(lambda t, d: t == before)
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, inp, world=crashing, run_id="r", **kw))
    return asyncio.run(durable.run_workflow(wf, inp, world=worlds.open(), run_id="r", **kw))


def intents(world: durable.World) -> list[str]:
    return [e.key for e in world.events("r") if e.type == "effect.intent"]  # type: ignore[union-attr]


def test_a_resumed_run_replays_every_request_and_tool_call(worlds: Worlds) -> None:
    """Resumed after a crash, the agent answers again without one more model request or tool call."""
    support = Support()
    answer = crash_then_resume(worlds, support.workflow(), "where is 1234?")
    assert answer == "at the Oslo depot, tomorrow"
    assert support.calls == Counter(
        {"model-0": 1, "find_order": 1, "model-1": 1, "track_parcel": 1, "carrier_eta": 1, "model-2": 1}
    )


def test_parallel_tool_calls_are_keyed_by_their_tool_call_id(worlds: Worlds) -> None:
    """The two calls of one turn are tools in branches named by turn and tool_call_id."""
    support = Support()
    world = worlds.open()
    asyncio.run(durable.run_workflow(support.workflow(), "q", world=world, run_id="r"))
    session = "session:support#0"
    tool = "support__function_toolset__orders__call_tool"
    assert sorted(intents(world)) == sorted(
        [
            f"{session}.model:support__model_request#0",
            f"{session}.turn-1[c_order].tool:{tool}__find_order#0",
            f"{session}.model:support__model_request#1",
            f"{session}.turn-2[c_track].tool:{tool}__track_parcel#0",
            f"{session}.turn-2[c_eta].tool:{tool}__carrier_eta#0",
            f"{session}.model:support__model_request#2",
        ]
    )


def test_a_renamed_tool_fails_the_resume_with_capability_drift(worlds: Worlds) -> None:
    """Resuming with a tool renamed in the agent raises CapabilityDriftError naming the tool."""
    crashing = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(Support().workflow(), "q", world=crashing, run_id="r"))
    renamed = Support(lookup_name="lookup_order")
    with pytest.raises(durable.CapabilityDriftError) as err:
        asyncio.run(durable.run_workflow(renamed.workflow(), "q", world=worlds.open(), run_id="r"))
    assert '"find_order" → "lookup_order"' in str(err.value)
    assert renamed.calls == Counter()


def test_a_renamed_agent_fails_the_resume_closed(worlds: Worlds) -> None:
    """Resuming with the agent renamed refuses to run: the log's session has the old name."""
    crashing = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(Support().workflow(), "q", world=crashing, run_id="r"))
    renamed = Support(name="helpdesk")
    with pytest.raises(durable.NondeterminismError, match=r"session 'helpdesk'.*session 'support'"):
        asyncio.run(durable.run_workflow(renamed.workflow(), "q", world=worlds.open(), run_id="r"))
    assert renamed.calls == Counter()


def test_a_changed_tool_schema_fails_the_resume_with_capability_drift(worlds: Worlds) -> None:
    """A tool whose parameters changed is drift: the signature in the session manifest differs."""
    crashing = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(Support().workflow(), "q", world=crashing, run_id="r"))
    changed = Support()
    extra: FunctionToolset[None] = FunctionToolset(id="orders")

    def find_order(order_id: str, include_history: bool = False) -> dict[str, str]:
        """Find an order by id."""
        return {}

    toolset = changed.agent.toolsets[-1]
    assert isinstance(toolset, FunctionToolset)
    extra.add_function(find_order)
    toolset.tools["find_order"] = extra.tools["find_order"]
    with pytest.raises(durable.CapabilityDriftError, match=r"find_order tool signature changed"):
        asyncio.run(durable.run_workflow(changed.workflow(), "q", world=worlds.open(), run_id="r"))


def test_outside_a_run_the_capability_is_transparent() -> None:
    """Outside a run the agent with Durability answers exactly as the same agent without it."""
    support = Support()
    plain = Support()
    plain.agent = Agent(FunctionModel(plain.model), name="support", toolsets=support.agent.toolsets)
    with_it = asyncio.run(support.agent.run("q"))
    without = asyncio.run(plain.agent.run("q"))
    assert with_it.output == without.output == "at the Oslo depot, tomorrow"
    parts = [[type(p).__name__ for p in m.parts] for m in with_it.all_messages()]
    assert parts == [[type(p).__name__ for p in m.parts] for m in without.all_messages()]
    assert support.calls["model-0"] == 1 and plain.calls["model-0"] == 1


def test_an_idempotent_tool_cut_by_a_crash_is_called_again(worlds: Worlds) -> None:
    """A tool with metadata {"durable": {"idempotent": True}} cut by a crash is re-driven."""
    support = Support(metadata=tool_options(idempotent=True))
    wf = support.workflow()
    tool_receipt = lambda t, d: t == "effect.receipt" and "find_order" in d["key"]  # noqa: E731
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, "q", world=worlds.crashing(tool_receipt), run_id="r"))
    answer = asyncio.run(durable.run_workflow(wf, "q", world=worlds.open(), run_id="r"))
    assert answer == "at the Oslo depot, tomorrow"
    assert support.calls["find_order"] == 2  # re-driven with the same idempotency key
    assert support.calls["model-0"] == 1


def test_a_tool_cut_after_its_intent_fails_closed_unless_idempotent(worlds: Worlds) -> None:
    """Without options, a tool whose intent has no receipt raises UnknownCommitError on resume."""
    support = Support()
    wf = support.workflow()
    tool_receipt = lambda t, d: t == "effect.receipt" and "find_order" in d["key"]  # noqa: E731
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, "q", world=worlds.crashing(tool_receipt), run_id="r"))
    with pytest.raises(durable.UnknownCommitError, match="find_order"):
        asyncio.run(durable.run_workflow(wf, "q", world=worlds.open(), run_id="r"))
    assert support.calls["find_order"] == 1


def test_a_tool_with_reconcile_is_asked_after_a_crash(worlds: Worlds) -> None:
    """A tool with metadata {"durable": {"reconcile": fn}} cut by a crash: fn answers for it."""
    asked: list[tuple[str, dict[str, Any]]] = []

    def reconcile(key: str, call: dict[str, Any]) -> Any:
        asked.append((key, call))
        return {"tracking_id": "TRK-88", "carrier": "Posten"}

    support = Support(metadata=tool_options(reconcile=reconcile))
    tool_receipt = lambda t, d: t == "effect.receipt" and "find_order" in d["key"]  # noqa: E731
    crashing = worlds.crashing(tool_receipt)
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(support.workflow(), "q", world=crashing, run_id="r"))
    answer = asyncio.run(durable.run_workflow(support.workflow(), "q", world=worlds.open(), run_id="r"))
    assert answer == "at the Oslo depot, tomorrow"
    assert support.calls["find_order"] == 1
    assert [call for _, call in asked] == [{"tool": "find_order", "args": {"order_id": "1234"}}]
    assert asked[0][0].startswith("r:session:support#0.turn-1[c_order].tool:")


def test_model_retry_and_call_deferred_cross_as_values(worlds: Worlds) -> None:
    """A tool's ModelRetry and CallDeferred are recorded as values and replayed without the tool."""
    calls: Counter[str] = Counter()

    def flaky(x: int) -> str:
        """Fails once with a retry for the model."""
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise ModelRetry("try again with x=2")
        return f"ok {x}"

    def later(x: int) -> str:
        """Runs outside the agent."""
        calls["later"] += 1
        raise CallDeferred

    def risky(x: int) -> str:
        """Needs a human's approval."""
        calls["risky"] += 1
        raise ApprovalRequired

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        calls[f"model-{turn}"] += 1
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart("flaky", {"x": 1}, tool_call_id="f1")])
        if turn == 1:
            return ModelResponse(parts=[ToolCallPart("flaky", {"x": 2}, tool_call_id="f2")])
        return ModelResponse(
            parts=[
                ToolCallPart("later", {"x": 3}, tool_call_id="l1"),
                ToolCallPart("risky", {"x": 4}, tool_call_id="r1"),
            ]
        )

    toolset: FunctionToolset[None] = FunctionToolset([flaky, later, risky], id="t")
    agent = Agent(
        FunctionModel(model),
        name="ctl",
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def ctl(q: str) -> list[list[str]]:
        out = (await agent.run(q)).output
        assert isinstance(out, DeferredToolRequests)
        return [[c.tool_call_id for c in out.calls], [c.tool_call_id for c in out.approvals]]

    assert crash_then_resume(worlds, ctl, "q") == [["l1"], ["r1"]]
    assert calls == Counter({"model-0": 1, "flaky": 2, "model-1": 1, "model-2": 1, "later": 1, "risky": 1})


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


def test_a_sub_agent_called_from_a_tool_is_part_of_that_tool_call(worlds: Worlds) -> None:
    """An agent run inside a tool of another agent runs in that tool's call, which records its output."""
    inner_calls: Counter[str] = Counter()

    def inner_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        inner_calls["inner-model"] += 1
        return ModelResponse(parts=[TextPart("from the expert")])

    expert = Agent(FunctionModel(inner_model), name="expert", capabilities=[Durability()])

    async def ask_expert(question: str) -> str:
        """Ask the expert agent."""
        return (await expert.run(question)).output

    def outer_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("ask_expert", {"question": "?"}, tool_call_id="x1")])
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

    assert crash_then_resume(worlds, delegate, "q") == "from the expert"
    assert inner_calls == Counter({"inner-model": 1})
    names = {e.name for e in worlds.open().events("r") if e.type == "effect.intent"}  # type: ignore[union-attr]
    assert names == {"lead__model_request", "lead__function_toolset__team__call_tool__ask_expert"}


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
