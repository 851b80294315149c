"""pydantic-ai agent code written for plain runs behaves the same inside a durable run."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import Agent, FunctionToolset, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

import durable
from durable.integrations.pydantic_ai import Durability
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.integrations.test_pydantic_ai import crash_then_resume


class LatLng(BaseModel):
    lat: float
    lng: float


def _located_agent(seen: list[type]) -> Agent[None, str]:
    """weather_agent's shape: a tool returns a pydantic model, the model code reads its attributes."""

    def locate(city: str) -> LatLng:
        """Where a city is."""
        return LatLng(lat=59.9, lng=10.7)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart("locate", {"city": "Oslo"}, tool_call_id="l1")])
        seen.append(type(returned[0]))
        return ModelResponse(parts=[TextPart(f"{returned[0].lat},{returned[0].lng}")])

    return Agent(
        FunctionModel(model),
        name="weather",
        toolsets=[FunctionToolset([locate], id="geo")],
        capabilities=[Durability()],
    )


def test_a_tool_returning_a_model_hands_the_model_on_the_first_run_and_on_replay(worlds: Worlds) -> None:
    """A tool's pydantic model value reaches the model code as that model, before and after a resume."""
    seen: list[type] = []
    agent = _located_agent(seen)

    @durable.workflow
    async def where(q: str) -> list[str]:
        result = await agent.run(q)
        parts = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
        return [result.output, type(parts[0].content).__name__]

    second_request = lambda t, d: t == "effect.receipt" and d["key"].endswith("model_request#1")  # noqa: E731
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(where, "q", world=worlds.crashing(second_request), run_id="r"))
    assert asyncio.run(durable.run_workflow(where, "q", world=worlds.open(), run_id="r")) == [
        "59.9,10.7",
        "LatLng",
    ]
    assert seen == [LatLng, LatLng]  # the first run's second request, then the resumed run's


def test_usage_added_by_a_delegate_agent_survives_a_replay(worlds: Worlds) -> None:
    """A tool running another agent with usage=ctx.usage: a resumed parent reports the uncut run's usage."""
    inner_calls: Counter[str] = Counter()

    def inner_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        inner_calls["inner"] += 1
        return ModelResponse(parts=[TextPart("joke")], usage=RequestUsage(input_tokens=100, output_tokens=7))

    delegate = Agent(FunctionModel(inner_model), name="jokes")

    async def joke(ctx: RunContext[None]) -> str:
        """Tell a joke."""
        return (await delegate.run("a joke", usage=ctx.usage)).output

    def outer_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(
                parts=[ToolCallPart("joke", {}, tool_call_id="j1")], usage=RequestUsage(input_tokens=5)
            )
        return ModelResponse(parts=[TextPart("done")], usage=RequestUsage(input_tokens=5))

    lead = Agent(
        FunctionModel(outer_model),
        name="lead",
        toolsets=[FunctionToolset([joke], id="fun")],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def counted(q: str) -> dict[str, Any]:
        usage = (await lead.run(q)).usage
        return {"requests": usage.requests, "input_tokens": usage.input_tokens}

    plain = asyncio.run(lead.run("q")).usage
    uncut = {"requests": plain.requests, "input_tokens": plain.input_tokens}
    assert crash_then_resume(worlds, counted, "q") == uncut == {"requests": 3, "input_tokens": 110}
    assert inner_calls["inner"] == 2  # the plain run's and the durable first run's; the resume added none


def test_an_agent_without_a_model_takes_the_capability_and_the_run_chooses_the_model(worlds: Worlds) -> None:
    """Agent(name=..., capabilities=[Durability(models=...)]) builds; a run picks its model by id."""
    asked: Counter[str] = Counter()

    def answer(word: str) -> FunctionModel:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            asked[word] += 1
            return ModelResponse(parts=[TextPart(word)])

        return FunctionModel(model)

    agent = Agent(
        name="md", capabilities=[Durability(models={"fast": answer("quick"), "deep": answer("slow")})]
    )

    @durable.workflow
    async def pick(model_id: str) -> str:
        return (await agent.run("q", model=model_id)).output

    assert crash_then_resume(worlds, pick, "deep") == "slow"
    assert asked == Counter({"slow": 1})
    names = {e.name for e in worlds.open().events("r") if e.type == "effect.intent"}  # type: ignore[union-attr]
    assert names == {"md__model_request__deep"}


def test_an_agent_without_a_model_run_without_one_fails_with_advice(world: durable.World) -> None:
    """Inside a run, an agent with no model and none passed to run() says how to give one."""
    agent = Agent(name="md", capabilities=[Durability()])

    @durable.workflow
    async def bare(q: str) -> str:
        return (await agent.run(q)).output

    with pytest.raises(UserError, match=r"model.*included when calling it"):
        asyncio.run(durable.run_workflow(bare, "q", world=world, run_id="r"))


def test_run_sync_in_a_sync_workflow_is_refused_with_advice_that_works(world: durable.World) -> None:
    """agent.run_sync in a sync workflow: ConfigurationError saying to await agent.run, which then works."""
    agent = Agent(TestModel(), name="s", capabilities=[Durability()])

    @durable.workflow(name="ask")
    def ask_sync(q: str) -> str:
        return agent.run_sync(q).output

    with pytest.raises(durable.ConfigurationError, match=r"await agent\.run\(\.\.\.\)") as err:
        asyncio.run(durable.run_workflow(ask_sync, "q", world=world, run_id="r"))
    assert err.value.run_id == "r"

    @durable.workflow(name="ask")
    async def ask(q: str) -> str:
        return (await agent.run(q)).output

    again = durable.run_workflow(ask, "q", world=world, run_id="r", retry_failed=True)  # as the error says
    assert asyncio.run(again) == "success (no tool calls)"


def test_a_streamed_run_yields_each_delta_as_the_model_produces_it(worlds: Worlds) -> None:
    """stream_text(delta=True) inside a run gets the deltas live, and a replay yields the recorded ones."""
    produced: list[str] = []
    words = ["the ", "whale ", "is ", "very ", "blue"]

    async def stream_model(messages: list[ModelMessage], info: AgentInfo) -> Any:
        for word in words:
            produced.append(word)
            yield word

    handled: list[list[str]] = []

    async def handler(ctx: Any, events: Any) -> None:
        async for event in events:
            if isinstance(event, PartDeltaEvent):
                handled[-1].append(event.delta.content_delta)  # type: ignore[union-attr]

    agent = Agent(
        FunctionModel(stream_function=stream_model),
        name="whales",
        capabilities=[Durability(event_stream_handler=handler)],
    )

    attempts: list[list[list[str]]] = []

    @durable.workflow
    async def whales(q: str) -> str:
        handled.append([])
        attempts.append([])
        async with agent.run_stream(q) as run:
            async for delta in run.stream_text(delta=True, debounce_by=None):
                attempts[-1].append([delta, "".join(produced)])  # and what the model had produced by then
        return "".join(delta for delta, _ in attempts[-1])

    assert crash_then_resume(worlds, whales, "q") == "the whale is very blue"
    live, replayed = attempts
    assert live == [[w, "".join(words[: i + 1])] for i, w in enumerate(words)]  # each delta as it came
    assert [delta for delta, _ in replayed] == words and produced == words  # from the log, not the model
    assert handled == [words[1:], words[1:]]  # the deltas after the part's start, live and replayed


def test_io_in_instructions_and_output_validators_made_a_tool_runs_once(worlds: Worlds) -> None:
    """The documented pattern: a durable tool called from instructions and a validator replays its value."""
    reads: Counter[str] = Counter()

    @durable.tool(idempotent=True)
    async def customer_name(customer_id: int) -> str:
        reads["customer_name"] += 1
        return "Ada"

    @durable.tool(idempotent=True)
    async def explain(query: str) -> str:
        reads["explain"] += 1
        return ""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"hello {info.instructions}")])

    agent = Agent(FunctionModel(model), name="bank", capabilities=[Durability()])

    @agent.instructions
    async def add_customer_name() -> str:
        return f"name={await customer_name(7)}"

    @agent.output_validator
    async def validate(output: str) -> str:
        assert await explain(output) == ""
        return output

    @durable.workflow
    async def bank(q: str) -> str:
        return (await agent.run(q)).output

    assert crash_then_resume(worlds, bank, "q") == "hello name=Ada"
    assert reads == Counter({"customer_name": 1, "explain": 1})


def test_a_live_stream_cut_by_a_crash_is_streamed_again(worlds: Worlds) -> None:
    """A crash before a streamed request's record is complete sends the request again on resume."""
    streamed: Counter[str] = Counter()

    async def stream_model(messages: list[ModelMessage], info: AgentInfo) -> Any:
        streamed["stream"] += 1
        for word in ["a ", "b ", "c"]:
            yield word

    agent = Agent(FunctionModel(stream_function=stream_model), name="cut", capabilities=[Durability()])

    @durable.workflow
    async def cut(q: str) -> str:
        async with agent.run_stream(q) as run:
            return "".join([d async for d in run.stream_text(delta=True, debounce_by=None)])

    crashing = worlds.crashing(lambda t, d: t == "stream.cursor")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(cut, "q", world=crashing, run_id="r"))
    assert asyncio.run(durable.run_workflow(cut, "q", world=worlds.open(), run_id="r")) == "a b c"
    assert streamed == Counter({"stream": 2})


def test_a_rebuilt_tool_value_keeps_the_recorded_json(worlds: Worlds) -> None:
    """An int returned under -> float replays as the int, so the next request still matches its record."""

    def measure() -> float:
        """A reading."""
        return 3  # type: ignore[return-value]  # what untyped-at-heart code does

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart("measure", {}, tool_call_id="m1")])
        return ModelResponse(parts=[TextPart(repr(returned[0]))])

    agent = Agent(
        FunctionModel(model),
        name="meter",
        toolsets=[FunctionToolset([measure], id="m")],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def meter(q: str) -> str:
        return (await agent.run(q)).output

    second_request = lambda t, d: t == "effect.receipt" and d["key"].endswith("model_request#1")  # noqa: E731
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(meter, "q", world=worlds.crashing(second_request), run_id="r"))
    assert asyncio.run(durable.run_workflow(meter, "q", world=worlds.open(), run_id="r")) == "3"


def test_two_delegates_at_once_in_one_tool_call_are_refused(world: durable.World) -> None:
    """Two delegate runs in flight in one tool call fail closed with NondeterminismError."""
    asked: Counter[str] = Counter()

    def inner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked["inner"] += 1
        return ModelResponse(parts=[TextPart("ok")])

    expert = Agent(FunctionModel(inner), name="expert", capabilities=[Durability()])

    async def ask_both() -> str:
        """Ask two experts at once."""
        a, b = await asyncio.gather(expert.run("a"), expert.run("b"))
        return a.output + b.output

    def outer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("ask_both", {}, tool_call_id="b1")])
        return ModelResponse(parts=[TextPart("done")])

    lead = Agent(
        FunctionModel(outer),
        name="lead",
        toolsets=[FunctionToolset([ask_both], id="t")],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def both(q: str) -> str:
        return (await lead.run(q)).output

    with pytest.raises(durable.NondeterminismError, match="still running there"):
        asyncio.run(durable.run_workflow(both, "q", world=world, run_id="r"))
    assert asked["inner"] <= 1


def test_delegates_in_branches_of_one_tool_call_record_their_calls_apart(world: durable.World) -> None:
    """Two delegates at once, each in a durable.branch of the tool body, each record in their own branch."""

    def inner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    expert = Agent(FunctionModel(inner), name="expert", capabilities=[Durability()])

    async def one(key: str) -> str:
        async with durable.branch(key):
            return (await expert.run(key)).output

    async def ask_both() -> str:
        """Ask two experts at once."""
        return "".join(await asyncio.gather(one("a"), one("b")))

    def outer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("ask_both", {}, tool_call_id="b1")])
        return ModelResponse(parts=[TextPart("done")])

    lead = Agent(
        FunctionModel(outer),
        name="lead",
        toolsets=[FunctionToolset([ask_both], id="t")],
        capabilities=[Durability()],
    )

    @durable.workflow
    async def both(q: str) -> str:
        return (await lead.run(q)).output

    assert asyncio.run(durable.run_workflow(both, "q", world=world, run_id="r")) == "done"
    inner_keys = [k for k in intents_of(world) if "expert__model_request" in k]
    assert sorted(inner_keys) == [
        "session:lead#0.turn-1[b1].[a].session:expert#0.model:expert__model_request#0",
        "session:lead#0.turn-1[b1].[b].session:expert#0.model:expert__model_request#0",
    ]


def intents_of(world: durable.World) -> list[str]:
    return [e.key for e in world.events("r") if e.type == "effect.intent"]  # type: ignore[union-attr]
