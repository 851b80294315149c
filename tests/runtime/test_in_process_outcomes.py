"""``run_workflow`` records how a run ends as a worker does: blocked, failed, or its record ended."""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.runtime import run_status
from tests.conftest import Worlds
from tests.engine.test_budgets import CALLS, agent

BAD = {"value": None}


@durable.step
async def shape(x: int) -> Any:
    CALLS.append(f"shape:{x}")
    return x if BAD["value"] is None else BAD["value"]


@durable.workflow
async def shaping(x: int) -> Any:
    return await shape(x)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    BAD["value"] = None


async def test_a_spent_budget_blocks_the_run_and_resume_run_with_a_larger_one_finishes_it(
    world: durable.World,
) -> None:
    """BudgetExhaustedError from run_workflow leaves the run blocked (budget); resume_run(budget=) ends it."""
    with pytest.raises(durable.BudgetExhaustedError):
        await durable.run_workflow(
            agent, 5, world=world, run_id="b", budget=durable.Budget(max_model_calls=3)
        )
    st = run_status(world, "b")
    assert (st.status, st.reason) == ("blocked", "budget")
    assert st.fixes[0].startswith("little resume b --budget JSON")
    h = durable.handle("b", world=world)
    with pytest.raises(durable.RunBlockedError) as blocked:
        await h.result(timeout=10)
    assert blocked.value.reason == "budget"
    assert isinstance(blocked.value.cause, durable.BudgetExhaustedError)
    assert [(f.kind, f.reason) for f in durable.doctor(world)] == [("blocked", "budget")]
    await durable.resume_run("b", world=world, budget=durable.Budget(max_model_calls=10))
    assert await h.result(timeout=30) == 5
    assert CALLS == ["q0", "q1", "q2", "q3", "q4"]
    assert durable.doctor(world) == []


async def test_a_blocked_run_resumed_by_run_workflow_is_no_longer_listed_as_blocked(worlds: Worlds) -> None:
    """run_workflow with a larger budget, in another process, completes a blocked run and ends its record."""
    with pytest.raises(durable.BudgetExhaustedError):
        await durable.run_workflow(
            agent, 4, world=worlds.open(), run_id="b", budget=durable.Budget(max_model_calls=2)
        )
    again = worlds.open()
    assert run_status(again, "b").status == "blocked"
    out = await durable.run_workflow(
        agent, 4, world=again, run_id="b", budget=durable.Budget(max_model_calls=4)
    )
    assert out == 4
    assert run_status(again, "b").status == "completed"
    assert durable.doctor(again) == []
    assert CALLS == ["q0", "q1", "q2", "q3"]


async def test_a_mistaken_call_leaves_a_blocked_run_blocked(world: durable.World) -> None:
    """A resume with another input is refused and changes nothing: the run stays blocked, with its fixes."""
    with pytest.raises(durable.BudgetExhaustedError):
        await durable.run_workflow(
            agent, 4, world=world, run_id="b", budget=durable.Budget(max_model_calls=2)
        )
    with pytest.raises(durable.RunFailedError, match="input"):
        await durable.run_workflow(
            agent, 9, world=world, run_id="b", budget=durable.Budget(max_model_calls=9)
        )
    st = run_status(world, "b")
    assert (st.status, st.reason) == ("blocked", "budget")


@pytest.mark.parametrize("bad", [object(), "\ud800"], ids=["object", "lone surrogate"])
async def test_a_value_that_cannot_be_stored_fails_the_run_in_the_drive_that_raised_it(
    world: durable.World, bad: Any
) -> None:
    """SerializationError from run_workflow ends the run failed at once; fixed, resume_run completes it."""
    BAD["value"] = bad
    with pytest.raises(durable.SerializationError):
        await durable.run_workflow(shaping, 7, world=world, run_id="s")
    st = run_status(world, "s")
    assert st.status == "failed"
    assert st.error is not None and st.error["error_type"].endswith("SerializationError")
    assert st.fixes[0].startswith("little resume s")
    assert [e.type for e in world.events("s")][-1] == "run.failed"
    with pytest.raises(durable.SerializationError):
        await durable.handle("s", world=world).result(timeout=10)
    assert await durable.recover_runs(world, [shaping]) == []  # nothing for a worker to finish
    BAD["value"] = None
    h = await durable.resume_run("s", world=world, workflows=[shaping])
    assert await h.result(timeout=30) == 7
    assert CALLS == ["shape:7", "shape:7"]  # the failed drive and the resumed one, no third
