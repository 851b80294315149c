"""``wrap(model)``: a LangChain chat model's calls recorded inside a run, replayed after a crash."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.tools import tool
from pydantic import BaseModel

import durable
from durable.integrations.langchain import wrap
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.helpers.langchain_doubles import DecidingChatModel, tool_call


class Counted:
    """A deciding function that counts how often the model really answered, per question."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()

    def __call__(self, messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
        question = str(messages[-1].content)
        self.asked[question] += 1
        if question == "weather?" and call.get("tools"):
            return AIMessage(content="", tool_calls=[tool_call("forecast", {"city": "Oslo"}, "call_f")])
        return f"answer to {question}"


async def settled() -> None:
    """One event-loop turn: a model call's receipt, batched with the next commit, is written.

    Without it a crash right before the run's end loses the last receipt, and
    the resume asks the model once more (which is right, but not what these
    tests count).
    """
    await asyncio.sleep(0)


def crash_then_resume(worlds: Worlds, wf: Any, value: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Run ``wf`` until just before it would complete (a crash), then resume it on a fresh world."""
    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                wf, value, world=worlds.crashing(lambda t, d: t == "run.completed"), run_id="r", **kwargs
            )
        )
    world = worlds.open()
    return asyncio.run(durable.run_workflow(wf, value, world=world, run_id="r", **kwargs)), world


@tool
def forecast(city: str) -> str:
    """The weather in a city."""
    return "rain"


def test_outside_a_run_a_wrapped_model_answers_as_before() -> None:
    """Outside a run every method calls the model itself, with the same result as an unwrapped twin."""
    plain = DecidingChatModel(decide=Counted())
    wrapped = wrap(DecidingChatModel(decide=Counted()))
    assert wrapped.invoke("hi").content == plain.invoke("hi").content == "answer to hi"
    assert asyncio.run(wrapped.ainvoke("hi")).content == "answer to hi"
    assert "".join(str(c.content) for c in wrapped.stream("hi")) == "answer to hi"
    assert [m.content for m in wrapped.batch(["a", "b"])] == ["answer to a", "answer to b"]
    assert isinstance(wrapped, DecidingChatModel)
    assert wrap(wrapped) is wrapped


def test_wrap_refuses_what_is_no_chat_model() -> None:
    """A tool (or anything else) handed to wrap() is refused with the advice to use wrap_tool()."""
    with pytest.raises(durable.ConfigurationError, match="wrap_tool"):
        wrap(forecast)


def test_a_resumed_run_replays_each_call_as_the_message_it_recorded(worlds: Worlds) -> None:
    """invoke, ainvoke and a bind_tools call: each asked once; the resume gets equal messages back."""
    decide = Counted()
    model = wrap(DecidingChatModel(decide=decide))
    seen: list[list[AIMessage]] = []

    @durable.workflow
    async def chat(q: str) -> str:
        a = model.invoke(q)
        b = await model.ainvoke([HumanMessage(f"more {a.content}")])
        c = await model.bind_tools([forecast]).ainvoke("weather?")
        seen.append([a, b, c])
        await settled()
        return f"{b.content} / {c.tool_calls[0]['args']['city']}"

    out, _ = crash_then_resume(worlds, chat, "hi")
    assert out == "answer to more answer to hi / Oslo"
    assert decide.asked == Counter({"hi": 1, "more answer to hi": 1, "weather?": 1})
    first, replayed = seen
    assert replayed == first  # content, tool calls, usage metadata, response metadata, ids
    assert replayed[2].usage_metadata is not None and replayed[2].tool_calls[0]["id"] == "call_f"


def test_a_streamed_call_replays_its_recorded_chunks(worlds: Worlds) -> None:
    """Astream yields the model's chunks the first time and the same chunks, recorded, on a resume."""
    decide = Counted()
    model = wrap(DecidingChatModel(decide=decide))
    streams: list[list[AIMessageChunk]] = []

    @durable.workflow
    async def chat(q: str) -> str:
        chunks = [c async for c in model.bind_tools([forecast]).astream(q)]
        streams.append(chunks)
        await settled()
        whole = chunks[0]
        for c in chunks[1:]:
            whole = whole + c
        return f"{whole.content}|{whole.tool_calls[0]['name'] if whole.tool_calls else ''}"

    out, world = crash_then_resume(worlds, chat, "weather?")
    assert out == "|forecast"
    assert decide.asked == Counter({"weather?": 1})
    live, replayed = streams
    assert replayed == live and all(isinstance(c, AIMessageChunk) for c in replayed)
    assert replayed[-1].tool_call_chunks[0]["id"] == "call_f"
    used = asyncio.run(durable.handle("r", world=world).usage())
    assert (used.calls, used.output_tokens) == (1, live[-1].usage_metadata["output_tokens"])  # type: ignore[index]


def test_a_sync_stream_inside_a_run_is_recorded_whole_and_replayed(worlds: Worlds) -> None:
    """model.stream on the run's own thread: the chunks come once the stream ended, and replay."""
    decide = Counted()
    model = wrap(DecidingChatModel(decide=decide))

    @durable.workflow
    async def chat(q: str) -> list[str]:
        return [str(c.content) for c in model.stream(q)]

    out, _ = crash_then_resume(worlds, chat, "sky")
    assert out == ["answer", " to", " sky", ""]
    assert decide.asked == Counter({"sky": 1})


class Forecast(BaseModel):
    """A forecast."""

    city: str
    sky: str


def test_a_structured_output_replays_as_its_type(worlds: Worlds) -> None:
    """with_structured_output(Schema): the resume gets a Schema instance, the model asked once."""
    asked: list[str] = []

    def decide(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage:
        asked.append(str(messages[-1].content))
        return AIMessage(
            content="", tool_calls=[tool_call("Forecast", {"city": "Oslo", "sky": "rain"}, "c1")]
        )

    model = wrap(DecidingChatModel(decide=decide))
    got: list[Any] = []

    @durable.workflow
    async def ask(q: str) -> str:
        out = await model.with_structured_output(Forecast).ainvoke(q)
        got.append(out)
        await settled()
        return str(out.sky)  # type: ignore[union-attr]

    out, _ = crash_then_resume(worlds, ask, "oslo?")
    assert out == "rain"
    assert asked == ["oslo?"]
    assert got == [Forecast(city="Oslo", sky="rain")] * 2
    assert all(type(g) is Forecast for g in got)


class Overloaded(ValueError):
    """The provider's own error."""


def test_a_model_error_is_recorded_and_replays_as_its_own_type(worlds: Worlds) -> None:
    """A model call that raised: the resume raises the same exception type without asking again."""
    asked: list[str] = []

    def decide(messages: list[BaseMessage], call: dict[str, Any]) -> str:
        asked.append(str(messages[-1].content))
        raise Overloaded("try later")

    model = wrap(DecidingChatModel(decide=decide))
    caught: list[BaseException] = []

    @durable.workflow
    async def ask(q: str) -> str:
        try:
            await model.ainvoke(q)
        except Overloaded as exc:
            caught.append(exc)
            await settled()
            return f"gave up: {exc}"
        return "answered"

    out, _ = crash_then_resume(worlds, ask, "now?")
    assert out == "gave up: try later"
    assert asked == ["now?"]
    assert [type(e) for e in caught] == [Overloaded, Overloaded]


def test_batch_and_abatch_record_each_input_and_keep_their_order(worlds: Worlds) -> None:
    """Batch asks one input after another, abatch all at once, each in its own scope: both replay."""
    decide = Counted()
    model = wrap(DecidingChatModel(decide=decide))

    @durable.workflow
    async def many(n: int) -> list[str]:
        first = model.batch([f"b{i}" for i in range(n)])
        second = await model.abatch([f"a{i}" for i in range(n)])
        await settled()
        return [str(m.content) for m in [*first, *second]]

    out, world = crash_then_resume(worlds, many, 3)
    assert out == [f"answer to {p}{i}" for p in "ba" for i in range(3)]
    assert set(decide.asked.values()) == {1} and len(decide.asked) == 6
    keys = [e.key for e in world.events("r") if e.type == "effect.receipt"]  # type: ignore[attr-defined]
    assert "batch[2].model:langchain__DecidingChatModel#0" in keys


def test_a_spent_budget_blocks_the_next_model_call(worlds: Worlds) -> None:
    """The usage a wrapped model reports counts against the run's budget; the call past it is refused."""
    decide = Counted()
    model = wrap(DecidingChatModel(decide=decide))

    @durable.workflow
    async def chatty(n: int) -> int:
        for i in range(n):
            await model.ainvoke(f"q{i}")
        return n

    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(
            durable.run_workflow(chatty, 5, world=world, run_id="b", budget=durable.Budget(max_model_calls=2))
        )
    assert sum(decide.asked.values()) == 2
    used = asyncio.run(durable.handle("b", world=world).usage())
    assert used.calls == 2 and used.input_tokens == 20


def test_a_plain_fake_model_wrapped_still_streams_outside_a_run() -> None:
    """A model without tools of its own (LangChain's FakeListChatModel) keeps streaming as before."""
    model = wrap(FakeListChatModel(responses=["hey"]))
    assert [c.content for c in model.stream("x")] == ["h", "e", "y"]
