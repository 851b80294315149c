"""A budget holds across a SIGKILLed worker and a resume on another one (SQLite and Postgres)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.runtime.unhappy import Procs, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes of the unhappy app on each backend."""
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def test_a_budget_counts_exactly_the_model_calls_that_executed_across_a_killed_worker(procs: Procs) -> None:
    """Killed after three calls, resumed by another worker: one more call executes, then it blocks."""
    w = procs.worker()
    h = durable.start_workflow(
        procs.app.budgeted,
        6,
        world=procs.world,
        queue=procs.app.unhappy,
        budget=durable.Budget(max_model_calls=4),
    )
    # A model call's receipt rides with the run's next commit (a lost one re-drives the call), and
    # turn 2's hold may note itself before that commit: kill once the three receipts are in the log.
    wait_for(
        lambda: (
            procs.bodies(hold=2)
            and sum(e.type == "effect.receipt" for e in procs.world.events(h.run_id)) == 3
        ),
        20,
        "the run to reach turn 2 with three model calls committed",
    )
    procs.kill(w)
    (procs.tmp / "go").touch()
    procs.worker()
    st = procs.ends(h.run_id, 30)
    assert (st.status, st.reason) == ("blocked", "budget")
    assert [b["turn"] for b in procs.bodies(model="think")] == [0, 1, 2, 3]
    used = asyncio.run(h.usage())
    assert (used.calls, used.input_tokens, used.output_tokens) == (4, 40, 8)
    with pytest.raises(durable.RunBlockedError) as blocked:
        asyncio.run(h.result(timeout=5))
    assert isinstance(blocked.value.cause, durable.BudgetExhaustedError)
    asyncio.run(durable.resume_run(h.run_id, world=procs.world, budget=durable.Budget(max_model_calls=6)))
    assert procs.ends(h.run_id, 30).status == "completed"
    assert [b["turn"] for b in procs.bodies(model="think")] == [0, 1, 2, 3, 4, 5]
    assert asyncio.run(h.usage()).calls == 6


def test_little_resume_budget_raises_a_blocked_runs_budget(procs: Procs) -> None:
    """`little resume RUN --budget JSON` records the new limits and the run finishes on its queue."""
    (procs.tmp / "go").touch()
    procs.worker()
    h = durable.start_workflow(
        procs.app.budgeted,
        3,
        world=procs.world,
        queue=procs.app.unhappy,
        budget=durable.Budget(max_model_calls=1),
    )
    st = procs.ends(h.run_id, 30)
    assert (st.status, st.reason) == ("blocked", "budget")
    done = procs.little_line(st.fixes[0].replace("JSON", "'{\"max_model_calls\": 3}'"))
    assert done.returncode == 0, done.stderr
    assert procs.ends(h.run_id, 30).status == "completed"
    assert len(procs.bodies(model="think")) == 3
    sets = [e for e in procs.world.events(h.run_id) if e.type == "budget.set"]
    assert [e.max_model_calls for e in sets] == [1, 3]  # type: ignore[union-attr]
    assert sets[-1].by  # type: ignore[union-attr]
