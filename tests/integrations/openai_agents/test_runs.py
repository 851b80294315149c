"""Agent runs inside a workflow on every backend: handoffs, parallel tools, nested agents, guardrails."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    GuardrailFunctionOutput,
    Model,
    ModelProvider,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    function_tool,
    input_guardrail,
)
from agents.testing import assistant_message, function_call

import durable
from durable.engine import Recorded
from durable.integrations.openai_agents import DurableRunner, install, tool_options
from durable.testing import run_replaying_always
from tests.conftest import Worlds
from tests.helpers.openai_agents_kit import ANSWER, Deciding, boss_desk, outputs, support_desk


class Calls(Counter[str]):
    """Counts each body's real calls (the ``ran`` of the test agents)."""

    async def __call__(self, name: str) -> None:
        self[name] += 1


def receipts(world: durable.World, run_id: str) -> list[str]:
    return list(Recorded.from_rows(world.log.read(run_id)).receipts)


def test_a_handoff_replayed_after_every_commit_gives_the_plain_sdk_s_output(worlds: Worlds) -> None:
    """Resumed after each commit, the run ends as the plain SDK's run; the log holds each call once."""
    plain_calls, calls = Calls(), Calls()
    plain = asyncio.run(Runner.run(support_desk(plain_calls)[0], "where are A1 and B2?"))
    triage, _, _ = support_desk(calls)

    @durable.workflow
    async def support(question: str) -> str:
        return str((await DurableRunner.run(triage, question)).final_output)

    world = worlds.open()
    replayed = asyncio.run(run_replaying_always(support, "where are A1 and B2?", world=world))
    assert replayed.output == plain.final_output
    assert replayed.output.startswith(ANSWER)
    assert replayed.resumes > 5
    assert set(calls) == set(plain_calls)  # every call was made, none that the plain run did not make
    assert receipts(world, replayed.run_id) == [
        "session:triage#0.model:openai_agents__model#0",
        "session:triage#0.model:openai_agents__model#1",
        "session:triage#0.turn-1[0].tool:openai_agents__tool__lookup_order#0",
        "session:triage#0.turn-1[1].tool:openai_agents__tool__lookup_order#0",
        "session:triage#0.model:openai_agents__model#2",
    ]


def test_a_run_that_completed_replays_without_calling_anything(worlds: Worlds) -> None:
    """A second drive of a finished run returns its recorded output; no model or tool is called."""
    calls = Calls()
    triage, _, _ = support_desk(calls)

    @durable.workflow
    async def support(question: str) -> str:
        return str((await DurableRunner.run(triage, question)).final_output)

    first = asyncio.run(durable.run_workflow(support, "q", world=worlds.open(), run_id="r"))
    ran = Counter(calls)
    assert asyncio.run(durable.run_workflow(support, "q", world=worlds.open(), run_id="r")) == first
    assert calls == ran


def test_tool_calls_of_one_response_run_at_the_same_time_and_replay(worlds: Worlds) -> None:
    """Two tools that wait for each other finish inside a run, and a resume after each commit replays them."""
    barrier: list[asyncio.Barrier] = []

    @function_tool
    async def meet(who: str) -> str:
        """Wait for the other one."""
        if not barrier:
            barrier.append(asyncio.Barrier(2))
        async with asyncio.timeout(10):
            await barrier[0].wait()
        return f"{who} met"

    tool_options(meet, idempotent=True)

    def decide(call: Any) -> Any:
        if not outputs(call):
            return [function_call("meet", {"who": w}, call_id=f"m_{w}") for w in ("ann", "bob")]
        return [assistant_message(" & ".join(o["output"] for o in outputs(call)))]

    agent = Agent(name="host", model=Deciding("host", decide, Calls()), tools=[meet])

    @durable.workflow
    async def party() -> str:
        barrier.clear()
        return str((await DurableRunner.run(agent, "meet")).final_output)

    assert asyncio.run(durable.run_workflow(party, world=worlds.open(), run_id="r")) == "ann met & bob met"
    replayed = asyncio.run(run_replaying_always(party, world=worlds.open()))
    assert replayed.output == "ann met & bob met"


def test_an_agent_used_as_a_tool_records_its_calls_below_the_tool_call(worlds: Worlds) -> None:
    """The nested agent's model and tool calls get keys below the call; the run's usage counts them once."""
    calls = Calls()
    boss = boss_desk(calls)

    @durable.workflow
    async def ask() -> dict[str, Any]:
        result = await DurableRunner.run(boss, "ask")
        usage = result.context_wrapper.usage
        return {"output": result.final_output, "tokens": usage.input_tokens + usage.output_tokens}

    world = worlds.open()
    out = asyncio.run(durable.run_workflow(ask, world=world, run_id="r"))
    assert out["output"].startswith("billing says: " + ANSWER)
    nested = "session:boss#0.turn-0[0].tool:openai_agents__tool__ask_billing#0.session:billing#0"
    assert f"{nested}.turn-0[1].tool:openai_agents__tool__lookup_order#0" in receipts(world, "r")
    again = asyncio.run(run_replaying_always(ask, world=worlds.open()))
    assert again.output == out  # the nested run's usage is added again when its call replays


def test_a_guardrail_agent_runs_beside_the_first_model_call_and_replays(worlds: Worlds) -> None:
    """A guardrail that runs an agent makes its calls in a scope of its own; nothing collides on replay."""
    calls = Calls()
    guard = Agent(name="guard", model=Deciding("guard", lambda c: [assistant_message("safe")], calls))

    @input_guardrail(run_in_parallel=True)
    async def screen(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        verdict = await Runner.run(guard, text)
        return GuardrailFunctionOutput(output_info=verdict.final_output, tripwire_triggered=False)

    desk = Agent(
        name="desk",
        model=Deciding("desk", lambda c: [assistant_message("hello")], calls),
        input_guardrails=[screen],
    )

    @durable.workflow
    async def greet() -> list[Any]:
        result = await DurableRunner.run(desk, "hi")
        return [result.final_output, [g.output.output_info for g in result.input_guardrail_results]]

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(greet, world=world, run_id="r")) == ["hello", ["safe"]]
    assert "session:desk#0.guardrail-input[screen].session:guard#0.model:openai_agents__model#0" in receipts(
        world, "r"
    )
    assert asyncio.run(run_replaying_always(greet, world=worlds.open())).output == ["hello", ["safe"]]


class Hooks(RunHooks[Any]):
    """Notes what the SDK calls back, in a list the test reads."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        self.seen.append(f"agent {agent.name}")

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        self.seen.append(f"llm {agent.name}: {system_prompt}")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.seen.append(f"llm-end {agent.name}")

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self.seen.append(f"handoff {from_agent.name} > {to_agent.name}")

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.seen.append(f"tool {tool.name}")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.seen.append(f"tool-end {tool.name}: {result}")


def hooked_desk(calls: Calls, seen: list[str]) -> Agent[Any]:
    """The support desk with user code the SDK calls back: an input guardrail and dynamic instructions."""
    triage, billing, _ = support_desk(calls)

    @input_guardrail
    async def polite(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        seen.append(f"guardrail {agent.name}")
        return GuardrailFunctionOutput(output_info="ok", tripwire_triggered=False)

    def instructions(ctx: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        seen.append(f"instructions {agent.name}")
        return "You answer billing questions, briefly."

    triage.input_guardrails = [polite]
    billing.instructions = instructions
    return triage


def test_hooks_guardrails_and_dynamic_instructions_run_again_on_a_replay(worlds: Worlds) -> None:
    """User code the SDK calls back is not recorded: a resume that replays every call calls it as a plain run.

    Each resume of ``run_replaying_always`` starts the body again; the last one
    replays every model and tool call and still calls the hooks, the guardrail
    and the dynamic instructions in the plain run's order, with the replayed
    responses and tool results.
    """
    plain_seen: list[str] = []
    plain_calls = Calls()
    plain = asyncio.run(Runner.run(hooked_desk(plain_calls, plain_seen), "q", hooks=Hooks(plain_seen)))
    assert {"guardrail triage", "instructions billing", "tool lookup_order"} <= set(plain_seen)
    seen: list[str] = []
    calls = Calls()
    triage = hooked_desk(calls, seen)

    @durable.workflow
    async def support() -> str:
        seen.clear()  # what this drive of the body called back
        return str((await DurableRunner.run(triage, "q", hooks=Hooks(seen))).final_output)

    replayed = asyncio.run(run_replaying_always(support, world=worlds.open()))
    assert replayed.output == plain.final_output
    assert replayed.resumes > 5
    assert set(calls) == set(plain_calls)  # cut after each intent, a call is made again; none other
    assert sorted(seen) == sorted(plain_seen)
    in_order = [e for e in plain_seen if not e.startswith("tool")]  # parallel tools: any order
    assert [e for e in seen if not e.startswith("tool")] == in_order


class Provider(ModelProvider):
    """A provider of models that decide from their input; it notes each name it is asked for."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.asked: list[str | None] = []

    def get_model(self, model_name: str | None) -> Model:
        self.asked.append(model_name)
        return Deciding(str(model_name), lambda c: [assistant_message(f"{model_name} says hi")], self.calls)


def test_a_run_config_s_model_provider_is_recorded_and_a_model_slot_maps_its_name(worlds: Worlds) -> None:
    """An agent naming its model gets it from the run's provider, asked for the slot's model; it replays."""
    agent = Agent(name="desk", model="desk")
    plain = asyncio.run(Runner.run(agent, "hi", run_config=RunConfig(model_provider=Provider(Calls()))))
    assert plain.final_output == "desk says hi"
    calls = Calls()
    provider = Provider(calls)

    @durable.workflow
    async def greet() -> str:
        return str(
            (await DurableRunner.run(agent, "hi", run_config=RunConfig(model_provider=provider))).final_output
        )

    world = worlds.open()
    out = asyncio.run(durable.run_workflow(greet, world=world, run_id="r", models={"desk": "desk-v2"}))
    assert out == "desk-v2 says hi"
    assert provider.asked == ["desk-v2"]
    assert calls == Counter({"model-desk-v2-0": 1})
    assert receipts(world, "r") == ["session:desk#0.model:openai_agents__model#0"]
    again = asyncio.run(
        durable.run_workflow(greet, world=worlds.open(), run_id="r", models={"desk": "desk-v2"})
    )
    assert again == out
    assert calls == Counter({"model-desk-v2-0": 1})


def test_install_makes_runner_run_durable_and_leaves_it_alone_outside_runs(worlds: Worlds) -> None:
    """After ``install()`` plain ``Runner.run`` records inside a workflow; outside one it runs as before."""
    calls = Calls()
    triage, _, _ = support_desk(calls)
    install()
    install()  # a second call changes nothing
    outside = asyncio.run(Runner.run(triage, "q"))

    @durable.workflow
    async def support() -> str:
        return str((await Runner.run(triage, "q")).final_output)

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(support, world=world, run_id="r")) == outside.final_output
    assert "session:triage#0.model:openai_agents__model#2" in receipts(world, "r")
    assert outside.last_agent.name == "billing"


def test_outside_a_run_durable_runner_is_the_sdk_s_runner() -> None:
    """``DurableRunner.run``, ``run_sync`` and ``run_streamed`` outside a workflow give the plain results."""
    calls, plain_calls = Calls(), Calls()
    triage, billing, lookup = support_desk(calls)
    plain = asyncio.run(Runner.run(support_desk(plain_calls)[0], "q"))
    result = asyncio.run(DurableRunner.run(triage, "q"))
    assert result.final_output == plain.final_output
    assert result.last_agent is billing  # the user's own agent, never a copy
    assert DurableRunner.run_sync(triage, "q").final_output == plain.final_output
    policy = asyncio.get_event_loop_policy()
    policy.get_event_loop().close()  # the SDK leaves the loop run_sync made open on purpose
    policy.set_event_loop(None)

    async def streamed() -> Any:
        r = DurableRunner.run_streamed(triage, "q")
        async for _ in r.stream_events():
            pass
        return r.final_output

    assert asyncio.run(streamed()) == plain.final_output
    assert calls["lookup-A1"] == 3


def test_run_sync_inside_a_run_is_refused_with_advice_that_works(worlds: Worlds) -> None:
    """``run_sync`` in a workflow says to await ``DurableRunner.run``; doing so completes the run."""
    triage, _, _ = support_desk(Calls())

    @durable.workflow
    def sync_support() -> str:
        return str(DurableRunner.run_sync(triage, "q").final_output)

    with pytest.raises(durable.ConfigurationError, match=r"await DurableRunner\.run\(agent, input\)"):
        asyncio.run(durable.run_workflow(sync_support, world=worlds.open(), run_id="r"))

    @durable.workflow
    async def support() -> str:
        return str((await DurableRunner.run(triage, "q")).final_output)

    assert asyncio.run(durable.run_workflow(support, world=worlds.open(), run_id="r2")).startswith(ANSWER)
