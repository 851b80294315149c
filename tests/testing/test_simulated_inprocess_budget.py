"""A run durable's simulator broke (seed 1), shrunk.

What broke:

    no-outcome: run_workflow raised BudgetExhaustedError: run 'sim-run' has spent its budget
    (max_model_calls=0; used 0 model calls, 0+0 tokens, cost 0), so the model call
    's0.model:m0#0' of run 'sim-run' did not execute. Raise the budget with
    durable.resume_run('sim-run', wo and left the run running with no driver (a worker records
    blocked or failed)
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: patched)."""

    @durable.model_call(name="m0", slot="writer")
    async def m0(arg: str) -> dict[str, Any]:
        return ledger.model("m0", arg, 13, 41)

    @durable.step(name="s0", max_visits=1)
    async def s0(arg: str) -> list[Any]:
        out: list[Any] = []
        out.append((await m0(f"a2@{arg}"))["text"])
        return out

    @durable.workflow(name="sim")
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await s0("a3"))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "call", "crash_at": None}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_budget_spent_on_the_in_process_path_leaves_the_run_blocked_not_running(backend: str) -> None:
    """run_workflow(budget=...) spends the budget: the run records blocked (budget), as a worker does."""
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=0, calls_changed=False, in_flight=1),
        deadline=None,
        topics=(),
    )
    outcome = simulate_one(setup, backend=backend, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
