"""A run durable's simulator broke (seeds 653 and 201052), shrunk: a parent whose child was cancelled.

What broke:

    never-quiet: a virtual day on it is running (None, None), orphaned while a worker is alive

A worker dies as the parent starts its child run; a cancel closes the child
(nobody drives it) and asks the parent to stop. Each drive of the parent then
met the child's ``RunCancelledError``, ended without a record in the parent's
log, and the next recovery drove it again, for ever. A child's cancellation
that the body lets through now ends the parent as cancelled.
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: none)."""

    @durable.workflow(name="sim_c1")
    async def c1(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        return out

    @durable.workflow(name="sim")
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await c1({"arg": "a6"}))
        return out

    return Code(version, sim, {"c1": c1})


SCHEDULE = [
    ["start", {"via": "worker", "crash_at": None}],
    ["worker", {"version": 1, "crash_at": 4, "until": None}],  # dies as the child starts
    ["worker", {"version": 1, "crash_at": None, "until": 20.0}],
    ["cancel", {"crash_at": None, "until": None}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_a_parent_whose_child_was_cancelled_ends_cancelled_instead_of_being_driven_for_ever(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The parent ends cancelled in its log, and no worker drives it again."""
    dsn = request.getfixturevalue("pg_server").dsn if backend == "postgres" else None
    expect = Expect(budget=None, calls_changed=False, in_flight=1)
    setup = Setup(code, input={"run": "sim-run"}, expect=expect)
    outcome = simulate_one(setup, backend=backend, dsn=dsn, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
    assert outcome.status == "cancelled"
