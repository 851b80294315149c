"""What goes wrong in an agent run inside a workflow, on every backend: errors, cancels, budgets, drift."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents")

import openai
from agents import Agent, ModelSettings, function_tool
from agents.retry import ModelRetrySettings, retry_policies
from agents.testing import assistant_message, function_call

import durable
from durable.engine import Recorded
from durable.integrations.openai_agents import DurableRunner, tool_options
from durable.integrations.openai_agents._errors import ProviderError, http_library
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on
from tests.helpers.openai_agents_kit import ANSWER, Deciding, outputs, refund_desk, support_desk


class Calls(Counter[str]):
    async def __call__(self, name: str) -> None:
        self[name] += 1


def test_a_tool_that_raises_tells_the_model_and_replays_the_same_text(worlds: Worlds) -> None:
    """The SDK's error text for a failing tool is the call's outcome: the resumed run sends the same."""
    attempts: list[str] = []

    @function_tool
    async def flaky(order_id: str) -> str:
        """Fails."""
        attempts.append(order_id)
        raise ValueError(f"no order {order_id}")

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("flaky", {"order_id": "Z9"}, call_id="f1")]
        return [assistant_message("tool said: " + outputs(call)[0]["output"])]

    agent = Agent(name="desk", model=Deciding("desk", decide, Calls()), tools=[flaky])

    @durable.workflow
    async def ask() -> str:
        result = await DurableRunner.run(agent, "find Z9")
        return str(result.final_output)

    crashing = worlds.crashing(on("effect.intent", "model:openai_agents__model#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(ask, world=crashing, run_id="r"))
    out = asyncio.run(durable.run_workflow(ask, world=worlds.open(), run_id="r"))
    assert out.startswith("tool said: An error occurred while running the tool")
    assert attempts == ["Z9"]


def test_a_model_error_is_recorded_and_the_sdk_retries_the_same_way_on_a_replay(worlds: Worlds) -> None:
    """A timed-out request replays as ``TimeoutError``: the SDK's retry policy retries again, as live."""
    calls = Calls()
    triage, _, _ = support_desk(calls)
    failed: list[int] = []
    inner = triage.model

    class TimesOutOnce(Deciding):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            if not failed:
                failed.append(1)
                raise TimeoutError("the model timed out")
            return await inner.get_response(*args, **kwargs)  # type: ignore[union-attr]

    retry = ModelRetrySettings(
        max_retries=2, backoff={"initial_delay": 0, "jitter": False}, policy=retry_policies.network_error()
    )
    triage.model = TimesOutOnce("triage", lambda c: None, calls)
    triage.model_settings = ModelSettings(retry=retry)

    @durable.workflow
    async def support() -> str:
        return str((await DurableRunner.run(triage, "where?")).final_output)

    crashing = worlds.crashing(on("effect.intent", "lookup_order"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(support, world=crashing, run_id="r"))
    before = Counter(calls)
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(support, world=world, run_id="r")).startswith(ANSWER)
    assert failed == [1]
    assert calls["model-triage-0"] == before["model-triage-0"] == 1  # the retried request replayed
    rec = Recorded.from_rows(world.log.read("r"))
    first = rec.receipts["session:triage#0.model:openai_agents__model#0"]
    assert (first["outcome"], first["error_type"]) == ("error", "builtins.TimeoutError")


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_a_rate_limited_request_replays_as_the_same_openai_error_and_the_sdk_retries_again(
    worlds: Worlds, streamed: bool
) -> None:
    """A 429 replays as ``openai.RateLimitError`` with its status, headers and body: the SDK retries again.

    Without them the replayed error would have no status, ``http_status([429])``
    would not retry, and the resumed run would fail where the live one went on.
    """
    calls = Calls()
    triage, _, _ = support_desk(calls)
    failed: list[int] = []
    inner = triage.model
    http = http_library()

    def limited() -> None:
        if not failed:
            failed.append(1)
            request = http.Request("POST", "https://api.openai.com/v1/responses")
            headers = {"retry-after-ms": "0", "x-request-id": "req_1", "openai-project": "proj_x"}
            response = http.Response(429, headers=headers, request=request)
            body = {"message": "Rate limit reached", "code": "rate_limit_exceeded"}
            raise openai.RateLimitError("Rate limit reached", response=response, body=body)

    class RateLimitedOnce(Deciding):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            limited()
            return await inner.get_response(*args, **kwargs)  # type: ignore[union-attr]

        async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            limited()
            async for event in inner.stream_response(*args, **kwargs):  # type: ignore[union-attr]
                yield event

    retry = ModelRetrySettings(
        max_retries=2, backoff={"initial_delay": 0, "jitter": False}, policy=retry_policies.http_status([429])
    )
    triage.model = RateLimitedOnce("triage", lambda c: None, calls)
    triage.model_settings = ModelSettings(retry=retry)

    @durable.workflow
    async def support() -> str:
        if not streamed:
            return str((await DurableRunner.run(triage, "where?")).final_output)
        result = DurableRunner.run_streamed(triage, "where?")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    crashing = worlds.crashing(on("effect.intent", "lookup_order"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(support, world=crashing, run_id="r"))
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(support, world=world, run_id="r")).startswith(ANSWER)
    assert failed == [1]
    assert calls["model-triage-0"] == 1  # the retried request replayed
    rec = Recorded.from_rows(world.log.read("r"))
    first = rec.receipts["session:triage#0.model:openai_agents__model" + ("_stream#0" if streamed else "#0")]
    assert first["outcome"] == "error"
    assert first["error_message"] == "openai.RateLimitError: Rate limit reached"
    assert "proj_x" not in json.dumps(first)  # only the headers the retry decision reads
    kept = ProviderError(*first["error_args"])
    again = kept.error()
    assert isinstance(again, openai.RateLimitError)
    assert (again.status_code, again.request_id, again.code) == (429, "req_1", "rate_limit_exceeded")


def test_a_cancel_during_a_tool_call_lets_it_finish_then_undoes_it(worlds: Worlds) -> None:
    """Cancelled while ``charge`` runs: its receipt is kept, the next call stops the run, the refund runs."""
    entered, release = asyncio.Event(), asyncio.Event()
    undone: list[tuple[int, Any]] = []

    async def refund(amount: int, result: Any) -> None:
        undone.append((amount, result))

    @function_tool
    async def charge(amount: int) -> str:
        """Charge the card."""
        entered.set()
        await release.wait()
        return f"charged {amount}"

    tool_options(charge, compensate=refund)

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("charge", {"amount": 20}, call_id="pay")]
        return [assistant_message("paid")]

    cashier = Agent(name="cashier", model=Deciding("cashier", decide, Calls()), tools=[charge])

    @durable.workflow
    async def pay() -> str:
        return str((await DurableRunner.run(cashier, "pay")).final_output)

    async def main() -> None:
        world = worlds.open()
        h = durable.start_workflow(pay, world=world)
        await asyncio.wait_for(entered.wait(), 30)
        await h.cancel()
        release.set()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        rec = Recorded.from_rows(world.log.read(h.run_id))
        key = "session:cashier#0.turn-0[0].tool:openai_agents__tool__charge#0"
        assert rec.receipts[key]["outcome"] == "ok"
        assert "compensate:" + key in rec.receipts

    asyncio.run(main())
    assert undone == [(20, "charged 20")]


def test_a_spent_budget_blocks_the_third_model_call_and_usage_counts_each_response_once(
    worlds: Worlds,
) -> None:
    """With ``max_model_calls=2`` the third call is refused; ``usage()`` is the scripted responses' usage."""
    calls = Calls()
    triage, _, _ = support_desk(calls)

    @durable.workflow
    async def support() -> str:
        return str((await DurableRunner.run(triage, "where?")).final_output)

    async def main() -> None:
        world = worlds.open()
        h = durable.start_workflow(support, world=world, budget=durable.Budget(max_model_calls=2))
        with pytest.raises(durable.RunBlockedError) as blocked:
            await h.result(timeout=30)
        assert isinstance(blocked.value.cause, durable.BudgetExhaustedError)
        used = await h.usage()
        assert (used.calls, used.input_tokens, used.output_tokens) == (2, 40, 7)
        assert calls["model-billing-3"] == 0
        again = await durable.resume_run(
            h.run_id, world=world, workflows=[support], budget=durable.Budget(max_model_calls=5)
        )
        assert (await again.result(timeout=30)).startswith(ANSWER)
        used = await h.usage()
        assert (used.calls, used.input_tokens, used.output_tokens) == (3, 80, 14)

    asyncio.run(main())
    assert calls["model-triage-0"] == calls["model-billing-1"] == calls["model-billing-3"] == 1


def _refunds_with(instructions: str, calls: Calls) -> Agent[Any]:
    agent = refund_desk(calls)
    agent.instructions = instructions
    return agent


def test_changed_instructions_fail_the_resume_closed_with_a_readable_drift(worlds: Worlds) -> None:
    """A deploy that edits an agent's instructions under a waiting run: the resume names what changed."""
    agents = {"v": _refunds_with("Refund orders.", Calls())}

    @durable.workflow
    async def refunds() -> str:
        return str((await DurableRunner.run(agents["v"], "refund")).final_output)

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r"))
    agents["v"] = _refunds_with("Refund every order, no questions asked.", Calls())
    with pytest.raises(durable.CapabilityDriftError) as drift:
        asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r", resume=True))
    text = str(drift.value)
    assert "agent__refunds__instructions tool signature changed" in text
    assert "sha256:" in text


def test_a_changed_tool_schema_fails_the_resume_closed(worlds: Worlds) -> None:
    """A tool that gained a parameter under a waiting run: the drift report names the tool."""
    calls = Calls()
    agents = {"v": refund_desk(calls)}

    @durable.workflow
    async def refunds() -> str:
        return str((await DurableRunner.run(agents["v"], "refund")).final_output)

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r"))

    @function_tool(needs_approval=True)
    async def refund(order_id: str, amount: int, reason: str) -> str:
        """Refund an order."""
        return "refunded"

    agents["v"] = Agent(
        name="refunds", instructions="Refund orders.", model=agents["v"].model, tools=[refund]
    )
    with pytest.raises(durable.CapabilityDriftError) as drift:
        asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r", resume=True))
    assert "(refund tool signature changed)" in str(drift.value)
    assert calls["refund-A1"] == 0
