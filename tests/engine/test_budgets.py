"""Budgets: checked before each model call executes, counted once per executed call, on every backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from tests.conftest import Worlds

CALLS: list[str] = []


@durable.model_call
async def ask(q: str) -> dict[str, Any]:
    CALLS.append(q)
    return {"model": "small", "usage": {"input_tokens": 100, "output_tokens": 20}, "text": q}


@durable.workflow
async def agent(turns: int) -> int:
    for i in range(turns):
        await ask(f"q{i}")
    return turns


@durable.workflow
async def child_agent(turns: int) -> int:
    for i in range(turns):
        await ask(f"child{i}")
    return turns


@durable.workflow
async def parent_agent(turns: int) -> int:
    await ask("parent")
    return 1 + await child_agent(turns)


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


def test_a_spent_call_budget_stops_the_run_before_the_next_model_call_executes(
    world: durable.World,
) -> None:
    """With max_model_calls=3 the fourth call raises BudgetExhaustedError and its body never runs."""

    async def go() -> None:
        with pytest.raises(durable.BudgetExhaustedError) as info:
            await durable.run_workflow(
                agent, 5, world=world, run_id="b", budget=durable.Budget(max_model_calls=3)
            )
        assert CALLS == ["q0", "q1", "q2"]
        assert info.value.limit == "max_model_calls"
        assert info.value.path == "model:ask#3"
        assert "resume_run('b'" in str(info.value)
        assert world.log.info("b").status == "running"  # type: ignore[union-attr]

    asyncio.run(go())


def test_a_resume_with_a_raised_budget_counts_replayed_calls_once(worlds: Worlds) -> None:
    """A resume on a new world with a larger budget replays three calls and executes two: five in all."""

    async def go() -> None:
        world = worlds.open()
        with pytest.raises(durable.BudgetExhaustedError):
            await durable.run_workflow(
                agent, 5, world=world, run_id="b", budget=durable.Budget(max_model_calls=3)
            )
        world.close()
        again = worlds.open()
        out = await durable.run_workflow(
            agent, 5, world=again, run_id="b", budget=durable.Budget(max_model_calls=5)
        )
        assert out == 5
        assert CALLS == ["q0", "q1", "q2", "q3", "q4"]
        used = await durable.handle("b", world=again).usage()
        assert used == durable.Usage(calls=5, input_tokens=500, output_tokens=100, cost=0.0)

    asyncio.run(go())


def test_the_budget_recorded_at_the_start_holds_for_a_resume_without_one(world: durable.World) -> None:
    """A resume that passes no budget is held to the one the log recorded."""

    async def go() -> None:
        with pytest.raises(durable.BudgetExhaustedError):
            await durable.run_workflow(
                agent, 4, world=world, run_id="b", budget=durable.Budget(max_tokens=240)
            )
        with pytest.raises(durable.BudgetExhaustedError) as info:
            await durable.run_workflow(agent, 4, world=world, run_id="b")
        assert info.value.limit == "max_tokens"
        assert CALLS == ["q0", "q1"]  # 120 tokens each: the third call would start at 240

    asyncio.run(go())


def test_cost_is_priced_per_million_tokens_by_model(world: durable.World) -> None:
    """Prices maps a model to (input, output) per million tokens; max_cost stops the run once reached."""

    async def go() -> None:
        budget = durable.Budget(max_cost=0.0003, prices={"small": (1.0, 5.0)})  # 0.0002 a call
        with pytest.raises(durable.BudgetExhaustedError) as info:
            await durable.run_workflow(agent, 3, world=world, run_id="c", budget=budget)
        assert info.value.limit == "max_cost"
        used = await durable.handle("c", world=world).usage()
        assert (used.calls, used.input_tokens, used.output_tokens) == (2, 200, 40)
        assert used.cost == pytest.approx(0.0004)

    asyncio.run(go())


def test_each_model_receipt_records_the_usage_its_result_reported(world: durable.World) -> None:
    """The receipt of a model call carries input_tokens, output_tokens and the model's name."""

    async def go() -> None:
        await durable.run_workflow(agent, 1, world=world, run_id="u")
        receipts = [e for e in world.events("u") if e.type == "effect.receipt"]
        assert [r.usage for r in receipts] == [{"input_tokens": 100, "output_tokens": 20, "model": "small"}]  # type: ignore[union-attr]

    asyncio.run(go())


def test_child_runs_count_against_their_parents_budget(worlds: Worlds) -> None:
    """A parent's calls and its child's share one budget; the parent's usage includes the child's."""

    async def go() -> None:
        world = worlds.open()
        with pytest.raises(durable.BudgetExhaustedError) as info:
            await durable.run_workflow(
                parent_agent, 4, world=world, run_id="p", budget=durable.Budget(max_model_calls=3)
            )
        assert CALLS == ["parent", "child0", "child1"]
        assert info.value.run_id == "p"
        world.close()
        again = worlds.open()
        out = await durable.run_workflow(
            parent_agent, 4, world=again, run_id="p", budget=durable.Budget(max_model_calls=5)
        )
        assert out == 5
        assert CALLS == ["parent", "child0", "child1", "child2", "child3"]
        assert (await durable.handle("p", world=again).usage()).calls == 5

    asyncio.run(go())


def test_a_started_run_whose_budget_is_spent_is_blocked_and_resume_run_raises_it(
    world: durable.World,
) -> None:
    """A spent budget blocks a started run (reason budget); resume_run(budget=) raises it and it finishes."""

    async def go() -> None:
        h = await durable.start_workflow(
            agent, 4, world=world, run_id="s", budget=durable.Budget(max_model_calls=2)
        )
        with pytest.raises(durable.RunBlockedError) as info:
            await h.result(timeout=30)
        assert info.value.reason == "budget"
        assert info.value.fixes[0].startswith("little resume s --budget JSON")
        assert (await h.status_detail()).reason == "budget"
        await durable.resume_run("s", world=world, budget=durable.Budget(max_model_calls=10))
        assert await h.result(timeout=30) == 4
        assert CALLS == ["q0", "q1", "q2", "q3"]
        assert [e.max_model_calls for e in world.events("s") if e.type == "budget.set"] == [2, 10]  # type: ignore[union-attr]

    asyncio.run(go())


def test_resume_run_refuses_a_budget_for_a_finished_run(world: durable.World) -> None:
    """A budget is raised for a stopped run; for a completed one resume_run says so and records nothing."""

    async def go() -> None:
        await durable.run_workflow(agent, 1, world=world, run_id="done")
        with pytest.raises(durable.ConfigurationError, match="is completed"):
            await durable.resume_run("done", world=world, budget=durable.Budget(max_model_calls=1))
        assert not [e for e in world.events("done") if e.type == "budget.set"]

    asyncio.run(go())


@pytest.mark.parametrize(
    "bad",
    [
        {"max_model_calls": -1},
        {"max_tokens": 1.5},
        {"max_cost": float("nan")},
        {"prices": {"m": (1.0,)}},
    ],
)
def test_a_budget_with_bad_limits_is_refused_at_once(bad: dict[str, Any]) -> None:
    """Budget() refuses negative or fractional counts, NaN costs and malformed prices."""
    with pytest.raises(durable.ConfigurationError, match="Budget"):
        durable.Budget(**bad)


def test_budget_that_is_not_a_budget_is_refused_before_anything_is_recorded(world: durable.World) -> None:
    """run_workflow(budget={...}) says it takes a durable.Budget and writes nothing."""

    async def go() -> None:
        with pytest.raises(durable.ConfigurationError, match=r"durable\.Budget"):
            await durable.run_workflow(agent, 1, world=world, run_id="x", budget={"max_tokens": 5})  # type: ignore[arg-type]
        assert world.log.info("x") is None

    asyncio.run(go())


@durable.tool(idempotent=True)
async def delegate(turns: int) -> int:
    return await child_agent(turns)


@durable.workflow
async def orchestrator(turns: int) -> int:
    await ask("plan")
    return await delegate(turns)


def test_a_child_run_started_in_a_tool_body_counts_against_the_parents_budget(worlds: Worlds) -> None:
    """A workflow started inside a tool shares the parent's budget, across a resume on a new world."""

    async def go() -> None:
        world = worlds.open()
        with pytest.raises(durable.BudgetExhaustedError):
            await durable.run_workflow(
                orchestrator, 3, world=world, run_id="o", budget=durable.Budget(max_model_calls=2)
            )
        assert CALLS == ["plan", "child0"]
        world.close()
        again = worlds.open()
        assert (await durable.handle("o", world=again).usage()).calls == 2
        out = await durable.run_workflow(
            orchestrator, 3, world=again, run_id="o", budget=durable.Budget(max_model_calls=4)
        )
        assert out == 3
        assert CALLS == ["plan", "child0", "child1", "child2"]
        assert (await durable.handle("o", world=again).usage()).calls == 4

    asyncio.run(go())
