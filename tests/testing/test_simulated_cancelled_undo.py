"""A run durable's simulator broke (seed 1405, memory backend), shrunk.

What broke:

    undone-but-completed: 1 compensations ran, yet the run completed
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: incompatible)."""

    @durable.tool(name="u0")
    async def u0(arg: str, result: str) -> str:
        return ledger.undo("u0", arg, result)

    @durable.tool(name="t0", idempotent=True, compensate=u0)
    async def t0(arg: str) -> str:
        return ledger.effect("t0", arg, flaky=0)

    @durable.tool(name="t3", reconcile=ledger.reconcile)
    async def t3(arg: str) -> str:
        return ledger.effect("t3", arg, flaky=0)

    @durable.workflow(name="sim", uses=[u0])
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await t0("a1"))
        out.append(await t3("a5"))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "worker", "crash_at": None}],
    ["worker", {"version": 1, "crash_at": 4, "until": 3.0}],
    ["cancel", {"crash_at": 2, "until": 3.0}],
    ["worker", {"version": 1, "crash_at": None, "until": 20.0}],
    ["resolve", {"happened": True, "crash_at": None, "until": None}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_cancelled_run_whose_undo_was_cut_stays_cancelled_after_a_resolve(backend: str) -> None:
    """The process cancelling a run dies inside its undo; resolving the cut undo does not complete the run."""
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=None, calls_changed=True, in_flight=1),
        deadline=None,
        topics=(),
    )
    outcome = simulate_one(setup, backend=backend, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
