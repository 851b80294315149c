"""A run durable's simulator broke (seed 2276), shrunk: a budget given at the start outlives a crash.

What broke:

    over-budget: 1 model calls ran under max_model_calls=0

A worker wrote the run's ``run.started`` and died before the ``budget.set`` it
would append next; the worker that took the run over found it started, so it
did not read the budget from the queue's record, and the model call ran
unbudgeted. The start and the budget are one transaction now.
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: none)."""

    @durable.model_call(name="m0", slot="writer")
    async def m0(arg: str) -> dict[str, Any]:
        return ledger.model("m0", arg, 39, 28)

    @durable.step(name="s1", max_visits=1)
    async def s1(arg: str) -> list[Any]:
        out: list[Any] = []
        out.append((await m0(f"a5@{arg}"))["text"])
        return out

    @durable.workflow(name="sim")
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await s1("a6"))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "worker", "crash_at": None}],
    ["worker", {"version": 1, "crash_at": 2, "until": 3.0}],  # dies after its first append
    ["worker", {"version": 1, "crash_at": None, "until": None}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_a_worker_that_dies_after_starting_a_run_leaves_it_its_budget(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Started with max_model_calls=0 and taken over after a crash: no model call runs, it blocks (budget)."""
    dsn = request.getfixturevalue("pg_server").dsn if backend == "postgres" else None
    ledger = Ledger()
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=0, calls_changed=False, in_flight=1),
        ledger=ledger,
    )
    outcome = simulate_one(setup, backend=backend, dsn=dsn, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
    assert outcome.status == "blocked"
    assert [e for e in ledger.effects() if e.name == "m0"] == []
