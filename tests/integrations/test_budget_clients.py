"""A token budget enforced on a real openai client whose HTTP goes to an httpx mock transport."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest

import durable
from durable.integrations import openai as durable_openai
from tests.conftest import Worlds


def _completion(n: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": f"answer {n}"},
            }
        ],
        "usage": {"prompt_tokens": 300, "completion_tokens": 50, "total_tokens": 350},
    }


class _Transport:
    """Answers every chat completion request and counts them (the calls that really left)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        return httpx.Response(200, json=_completion(len(self.sent)))


def _client(transport: _Transport) -> Any:
    http = httpx.AsyncClient(transport=httpx.MockTransport(transport))
    return durable_openai.wrap(
        openai.AsyncOpenAI(
            base_url="http://127.0.0.1:9/v1", api_key="offline", max_retries=0, http_client=http
        )
    )


def _agent(client: Any) -> Any:
    @durable.workflow(name="budgeted_chat")
    async def chat(turns: int) -> list[str]:
        out = []
        for i in range(turns):
            reply = await client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": f"turn {i}"}]
            )
            out.append(reply.choices[0].message.content)
        return out

    return chat


def test_a_token_budget_stops_an_openai_agent_before_the_request_that_would_pass_it(worlds: Worlds) -> None:
    """1000 tokens at 350 a response: three requests leave, the fourth is refused, and usage says 1050."""
    transport = _Transport()
    world = worlds.open()
    chat = _agent(_client(transport))
    budget = durable.Budget(max_tokens=1000, prices={"gpt-test": (2.0, 8.0)})
    with pytest.raises(durable.BudgetExhaustedError) as info:
        asyncio.run(durable.run_workflow(chat, 5, world=world, run_id="chat", budget=budget))
    assert info.value.limit == "max_tokens"
    assert len(transport.sent) == 3
    used = asyncio.run(durable.handle("chat", world=world).usage())
    assert (used.calls, used.input_tokens, used.output_tokens) == (3, 900, 150)
    assert used.cost == pytest.approx(3 * (300 * 2.0 + 50 * 8.0) / 1e6)
    receipts = [e for e in world.events("chat") if e.type == "effect.receipt"]
    assert receipts[0].usage == {"input_tokens": 300, "output_tokens": 50, "model": "gpt-test"}  # type: ignore[union-attr]


def test_a_raised_token_budget_replays_the_recorded_openai_responses_without_sending_them(
    worlds: Worlds,
) -> None:
    """After the budget is raised the three recorded responses replay; only two more requests leave."""
    transport = _Transport()
    world = worlds.open()
    chat = _agent(_client(transport))
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(
            durable.run_workflow(chat, 5, world=world, run_id="chat", budget=durable.Budget(max_tokens=1000))
        )
    out = asyncio.run(
        durable.run_workflow(chat, 5, world=world, run_id="chat", budget=durable.Budget(max_tokens=2000))
    )
    assert out == [f"answer {n}" for n in range(1, 6)]
    assert len(transport.sent) == 5
    assert asyncio.run(durable.handle("chat", world=world).usage()).calls == 5


def test_a_spent_budget_blocks_an_openai_run_and_resume_run_raises_it(worlds: Worlds) -> None:
    """The run of run_workflow is blocked (budget) at once; resume_run with more tokens finishes it."""
    transport = _Transport()
    world = worlds.open()
    chat = _agent(_client(transport))

    async def go() -> list[str]:
        with pytest.raises(durable.BudgetExhaustedError):
            await durable.run_workflow(
                chat, 4, world=world, run_id="chat", budget=durable.Budget(max_tokens=700)
            )
        h = durable.handle("chat", world=world)
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=10)
        assert blocked.value.reason == "budget"
        assert blocked.value.fixes[0].startswith("little resume chat --budget JSON")
        await durable.resume_run("chat", world=world, budget=durable.Budget(max_tokens=2000))
        out: list[str] = await h.result(timeout=30)
        return out

    assert asyncio.run(go()) == [f"answer {n}" for n in range(1, 5)]
    assert len(transport.sent) == 4


def test_a_pydantic_ai_agent_records_each_model_responses_usage_and_its_budget_stops_it(
    worlds: Worlds,
) -> None:
    """Each model request's receipt holds the response's usage; max_model_calls=2 stops the third request."""
    pytest.importorskip("pydantic_ai")
    from tests.integrations.test_pydantic_ai import Support

    support = Support()
    world = worlds.open()
    with pytest.raises(durable.BudgetExhaustedError):
        asyncio.run(
            durable.run_workflow(
                support.workflow(), "q", world=world, run_id="pa", budget=durable.Budget(max_model_calls=2)
            )
        )
    assert support.calls["model-2"] == 0
    usages = [e.usage for e in world.events("pa") if e.type == "effect.receipt" and e.usage]  # type: ignore[union-attr]
    assert len(usages) == 2
    assert all(u["input_tokens"] > 0 and u["output_tokens"] > 0 and u["model"] for u in usages)
    used = asyncio.run(durable.handle("pa", world=world).usage())
    assert used.calls == 2
    assert used.input_tokens == sum(u["input_tokens"] for u in usages)
