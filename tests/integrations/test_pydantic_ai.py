"""The pydantic-ai capability: recorded model requests and tool calls, replay, drift, transparency."""

from __future__ import annotations

import asyncio
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
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

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
    with pytest.raises(
        durable.NondeterminismError, match=r"(?s)recorded:  session 'support'.*attempted: session 'helpdesk'"
    ):
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


def test_removed_tool_options_fail_the_resume_with_capability_drift(worlds: Worlds) -> None:
    """Removing tool_options(idempotent=True) from a tool under an in-flight run is drift, with its key."""
    crashing = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                Support(metadata=tool_options(idempotent=True)).workflow(), "q", world=crashing, run_id="r"
            )
        )
    plain = Support()
    with pytest.raises(durable.CapabilityDriftError) as err:
        asyncio.run(durable.run_workflow(plain.workflow(), "q", world=worlds.open(), run_id="r"))
    assert ".options.idempotent" in str(err.value) and "accept_drift" in str(err.value)
    assert plain.calls == Counter()
