"""A run durable's simulator broke (seed 49, memory backend), shrunk.

What broke:

    compensated-wrong: the run says compensated=[], expected
    ['compensate:s0.visit[0].tool:t0#0']
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, SimulatedFailure, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: none)."""

    @durable.tool(name="u0")
    async def u0(arg: str, result: str) -> str:
        return ledger.undo("u0", arg, result)

    @durable.tool(name="t0", idempotent=True, compensate=u0)
    async def t0(arg: str) -> str:
        return ledger.effect("t0", arg, flaky=0)

    @durable.step(name="s0", max_visits=2)
    async def s0(arg: str) -> list[Any]:
        out: list[Any] = []
        out.append(await t0(f"a1@{arg}"))
        raise SimulatedFailure(f"the body fails at {arg}")
        return out

    @durable.workflow(name="sim", uses=[u0])
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        for i1 in range(1):
            out.append(await s0(f"a2.{i1}"))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "worker", "crash_at": None}],
    ["worker", {"version": 1, "crash_at": 5, "until": None}],
    ["cancel", {"crash_at": None, "until": 0.5}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_compensation_cut_by_a_crash_is_finished_and_named_by_the_next_drive(backend: str) -> None:
    """A worker dies inside the undo of a failed run; the next drive finishes it and says compensated."""
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=None, calls_changed=False, in_flight=1),
        deadline=None,
        topics=(),
    )
    outcome = simulate_one(setup, backend=backend, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
