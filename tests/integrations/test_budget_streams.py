"""Streamed model calls record their usage and count against a token budget (real clients, SSE on a mock)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

httpx2 = pytest.importorskip("httpx2")  # what the anthropic client sends its requests with

import durable  # noqa: E402
from durable.integrations import anthropic as durable_anthropic  # noqa: E402
from durable.integrations import openai as durable_openai  # noqa: E402
from tests.conftest import Worlds  # noqa: E402

USAGE_IN, USAGE_OUT = 300, 50


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        out.append(f"{head}data: {body}\n\n")
    return "".join(out).encode()


def _openai_chat_stream(n: int, with_usage: bool) -> bytes:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    chunks: list[tuple[str | None, Any]] = [
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "answer "}}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {"content": str(n)}, "finish_reason": "stop"}]}),
    ]
    if with_usage:  # stream_options={"include_usage": True}: one last chunk, no choices, the usage
        usage = {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT, "total_tokens": 350}
        chunks.append((None, {**base, "choices": [], "usage": usage}))
    chunks.append((None, "[DONE]"))
    return _sse(chunks)


def _anthropic_stream(n: int) -> bytes:
    message = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": 1},
    }
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": message}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": f"answer {n}"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": USAGE_OUT},  # the running total of output tokens
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


class _SSE:
    """Serves every request as a server-sent event stream and keeps what was sent (the calls that left)."""

    def __init__(self, body: Any) -> None:
        self.body = body
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.sent.append(json.loads(request.content))
        sent = self.sent[-1]
        http = httpx2 if type(request).__module__.startswith("httpx2") else httpx  # the client's own httpx
        return http.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.body(len(self.sent), sent)
        )


def _openai(transport: _SSE, *, sync: bool = False) -> Any:
    mock = httpx.MockTransport(transport)
    if sync:
        return openai.OpenAI(
            base_url="http://127.0.0.1:9/v1",
            api_key="offline",
            max_retries=0,
            http_client=httpx.Client(transport=mock),
        )
    return openai.AsyncOpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="offline",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=mock),
    )


def _openai_transport() -> _SSE:
    return _SSE(
        lambda n, sent: _openai_chat_stream(n, bool((sent.get("stream_options") or {}).get("include_usage")))
    )


def _tokens_budget() -> durable.Budget:
    return durable.Budget(max_tokens=1000, prices={"gpt-test": (2.0, 8.0), "claude-test": (3.0, 15.0)})


def _model_receipts(world: durable.World, run_id: str) -> list[Any]:
    events = world.events(run_id)
    models = {e.key for e in events if e.type == "effect.intent" and e.kind == "model"}  # type: ignore[union-attr]
    return [e for e in events if e.type == "effect.receipt" and e.key in models]  # type: ignore[union-attr]


def test_a_streamed_openai_call_records_the_usage_of_its_last_chunk_and_the_budget_counts_it(
    worlds: Worlds,
) -> None:
    """include_usage streams at 350 tokens each: three leave, the fourth is refused, usage says 1050."""
    transport = _openai_transport()
    client = durable_openai.wrap(_openai(transport))

    @durable.workflow(name="streamed_chat")
    async def chat(turns: int) -> list[str]:
        out = []
        for i in range(turns):
            stream = await client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": f"turn {i}"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            out.append("".join([c.choices[0].delta.content or "" async for c in stream if c.choices]))
        return out

    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError) as info:
        asyncio.run(durable.run_workflow(chat, 5, world=world, run_id="s", budget=_tokens_budget()))
    assert info.value.limit == "max_tokens"
    assert len(transport.sent) == 3
    receipts = _model_receipts(world, "s")
    assert receipts[0].usage == {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT, "model": "gpt-test"}
    used = asyncio.run(durable.handle("s", world=world).usage())
    assert (used.calls, used.input_tokens, used.output_tokens) == (3, 900, 150)
    assert used.cost == pytest.approx(3 * (USAGE_IN * 2.0 + USAGE_OUT * 8.0) / 1e6)


def test_a_streamed_openai_call_without_include_usage_counts_as_a_call_with_no_tokens(worlds: Worlds) -> None:
    """Without stream_options the stream reports no usage: the call counts, its tokens cannot."""
    transport = _openai_transport()
    client = durable_openai.wrap(_openai(transport))

    @durable.workflow(name="streamed_chat_plain")
    async def chat(turns: int) -> int:
        for i in range(turns):
            stream = await client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": f"turn {i}"}], stream=True
            )
            _ = [c async for c in stream]
        return turns

    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(
            durable.run_workflow(chat, 5, world=world, run_id="p", budget=durable.Budget(max_model_calls=2))
        )
    assert len(transport.sent) == 2
    assert _model_receipts(world, "p")[0].usage is None
    used = asyncio.run(durable.handle("p", world=world).usage())
    assert (used.calls, used.input_tokens) == (2, 0)


def test_a_sync_openai_stream_records_its_usage(worlds: Worlds) -> None:
    """The sync client's stream is recorded whole; its receipt holds the usage of the last chunk."""
    transport = _openai_transport()
    client = durable_openai.wrap(_openai(transport, sync=True))

    @durable.workflow(name="sync_streamed_chat")
    def chat(turns: int) -> int:
        for i in range(turns):
            for _ in client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": f"turn {i}"}],
                stream=True,
                stream_options={"include_usage": True},
            ):
                pass
        return turns

    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(durable.run_workflow(chat, 5, world=world, run_id="y", budget=_tokens_budget()))
    assert len(transport.sent) == 3
    assert _model_receipts(world, "y")[0].usage == {
        "input_tokens": USAGE_IN,
        "output_tokens": USAGE_OUT,
        "model": "gpt-test",
    }


def test_a_streamed_anthropic_call_records_message_start_and_message_delta_usage(worlds: Worlds) -> None:
    """Input tokens from message_start, output from message_delta: 350 a stream, so three leave."""
    transport = _SSE(lambda n, sent: _anthropic_stream(n))
    client = durable_anthropic.wrap(
        anthropic.AsyncAnthropic(
            base_url="http://127.0.0.1:9",
            api_key="offline",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(transport)),  # its own httpx
        )
    )

    @durable.workflow(name="streamed_claude")
    async def ask(turns: int) -> list[str]:
        out = []
        for i in range(turns):
            async with client.messages.stream(
                model="claude-test", max_tokens=64, messages=[{"role": "user", "content": f"turn {i}"}]
            ) as stream:
                out.append("".join([t async for t in stream.text_stream]))
        return out

    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(durable.run_workflow(ask, 5, world=world, run_id="a", budget=_tokens_budget()))
    assert len(transport.sent) == 3
    assert _model_receipts(world, "a")[0].usage == {
        "input_tokens": USAGE_IN,
        "output_tokens": USAGE_OUT,
        "model": "claude-test",
    }
    used = asyncio.run(durable.handle("a", world=world).usage())
    assert (used.calls, used.input_tokens, used.output_tokens) == (3, 900, 150)
    assert used.cost == pytest.approx(3 * (USAGE_IN * 3.0 + USAGE_OUT * 15.0) / 1e6)


def test_a_pydantic_ai_streamed_run_records_the_usage_of_each_streamed_request(worlds: Worlds) -> None:
    """run_stream on an openai chat model over SSE: each streamed request's receipt holds its usage."""
    pytest.importorskip("pydantic_ai")
    # pydantic-ai's OpenAI model needs a newer openai than the lowest one this project supports.
    pytest.importorskip(
        "pydantic_ai.models.openai",
        reason="pydantic-ai's OpenAI model needs a newer openai",
        exc_type=ImportError,
    )
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from durable.integrations.pydantic_ai import Durability

    transport = _openai_transport()
    model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=_openai(transport)))
    agent = Agent(model, name="streamer", capabilities=[Durability()])

    @durable.workflow(name="pa_streamed")
    async def ask(turns: int) -> list[str]:
        out = []
        for i in range(turns):
            async with agent.run_stream(f"turn {i}") as run:
                out.append("".join([t async for t in run.stream_text(delta=True)]))
        return out

    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(durable.run_workflow(ask, 5, world=world, run_id="pa", budget=_tokens_budget()))
    assert len(transport.sent) == 3
    assert all(s["stream_options"] == {"include_usage": True} for s in transport.sent)
    usages = [r.usage for r in _model_receipts(world, "pa")]
    assert [(u["input_tokens"], u["output_tokens"]) for u in usages] == [(USAGE_IN, USAGE_OUT)] * 3
    used = asyncio.run(durable.handle("pa", world=world).usage())
    assert (used.calls, used.input_tokens, used.output_tokens) == (3, 900, 150)


@durable.model_call(name="own_stream")
async def own_stream(prompt: str) -> AsyncIterator[dict[str, Any]]:
    for word in ("one", "two"):
        yield {"text": word}
    yield {"usage": {"input_tokens": 40, "output_tokens": 10}, "model": "mine"}


@durable.workflow(name="own_streams")
async def own_streams(turns: int) -> int:
    for i in range(turns):
        _ = [c async for c in own_stream(f"turn {i}")]
    return turns


def test_an_own_streaming_model_call_reports_usage_in_a_chunk_and_a_replay_counts_it_once(
    worlds: Worlds,
) -> None:
    """A @model_call generator that yields a usage chunk: 50 tokens a call, so a 120 budget allows three."""
    world = worlds.open()
    budget = durable.Budget(max_tokens=120)
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(durable.run_workflow(own_streams, 5, world=world, run_id="o", budget=budget))
    used = asyncio.run(durable.handle("o", world=world).usage())
    assert (used.calls, used.input_tokens, used.output_tokens) == (3, 120, 30)
    with pytest.raises(durable.BudgetExhaustedError):  # replayed: the three recorded streams count once
        asyncio.run(durable.run_workflow(own_streams, 5, world=worlds.open(), run_id="o", budget=budget))
    assert asyncio.run(durable.handle("o", world=world).usage()).calls == 3
