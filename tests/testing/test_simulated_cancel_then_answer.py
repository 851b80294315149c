"""A run durable's simulator broke (seed 744), shrunk: an answer after a cut cancellation completed the run.

What broke:

    undone-but-completed: 1 compensations ran, yet the run completed

The run waits at an interrupt; a cancel drives it to its undo and its process
dies inside the compensation. An answer then resumed the run past the
interrupt to ``completed``, its confirmed call already undone. An answer does
not take a pending cancellation back: it is refused, and the run's fix is the
cancel that finishes the undo.
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: tool_required)."""

    @durable.tool(name="u1")
    async def u1(arg: str, result: str) -> str:
        return ledger.undo("u1", arg, result)

    @durable.tool(name="t2", idempotent=True, compensate=u1)
    async def t2(arg: str) -> str:
        return ledger.effect("t2", arg, flaky=0)

    @durable.step(name="s1", max_visits=1)
    async def s1(arg: str) -> list[Any]:
        out: list[Any] = []
        out.append(await t2(f"a8@{arg}"))
        return out

    @durable.workflow(name="sim", uses=[u1])
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await durable.parallel("p9", ["a7.0"], s1, key=str))
        out.append(durable.interrupt("a10"))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "background", "crash_at": None}],
    ["cancel", {"crash_at": 2, "until": None}],  # dies inside the undo
    ["answer", {"value": "answer0", "crash_at": None, "until": 3.0}],
    ["cancel", {"crash_at": None, "until": None}],  # the fix the run prints
    ["resolve", {"happened": True, "crash_at": None, "until": None}],  # the cut undo (a plain tool) ran
]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_an_answer_after_a_cancel_cut_inside_its_undo_is_refused_and_the_run_ends_cancelled(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The answer is refused; the cancel, then the cut undo resolved: the run is cancelled, undone once."""
    dsn = request.getfixturevalue("pg_server").dsn if backend == "postgres" else None
    ledger = Ledger()
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=None, calls_changed=True, in_flight=1),
        ledger=ledger,
    )
    outcome = simulate_one(setup, backend=backend, dsn=dsn, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
    assert any("is being cancelled" in n for n in outcome.notes), outcome.notes
    assert outcome.status == "cancelled"
    assert [e.name for e in ledger.effects() if e.kind == "undo"] == ["u1"]


def in_process_code(version: int, ledger: Ledger) -> Code:
    """The run of seed 2979, driven by run_workflow in the calling process."""

    @durable.tool(name="u1")
    async def u1(arg: str, result: str) -> str:
        return ledger.undo("u1", arg, result)

    @durable.tool(name="t1", compensate=u1)
    async def t1(arg: str) -> str:
        return ledger.effect("t1", arg, flaky=0)

    @durable.step(name="s0", max_visits=1)
    async def s0(arg: str) -> list[Any]:
        out: list[Any] = []
        out.append(await t1(f"a4@{arg}"))
        return out

    @durable.workflow(name="sim", uses=[u1])
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await durable.parallel("p5", ["a3.0"], s0, key=str))
        return out

    return Code(version, sim, {})


IN_PROCESS = [
    ["start", {"via": "call", "crash_at": 4}],  # run_workflow's process dies after t1's receipt
    ["cancel", {"crash_at": 2, "until": 0.5}],  # the canceller dies inside the undo
    ["call", {"crash_at": None, "until": None}],  # run_workflow again: it must finish the cancel
]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_run_workflow_of_a_run_whose_cancel_was_cut_in_its_undo_finishes_the_cancel(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Seed 2979: a later run_workflow of the run goes on cancelling it instead of completing it."""
    dsn = request.getfixturevalue("pg_server").dsn if backend == "postgres" else None
    ledger = Ledger()
    expect = Expect(budget=None, calls_changed=False, in_flight=1)
    setup = Setup(in_process_code, input={"run": "sim-run"}, expect=expect, ledger=ledger)
    outcome = simulate_one(setup, backend=backend, dsn=dsn, schedule=IN_PROCESS)
    assert outcome.violations == [], outcome.violations
    # The cut undo is a plain tool: the cancelling drive blocks on it instead of completing the run.
    assert outcome.status == "blocked", outcome.notes
    assert any("UnknownCommitError: the compensation" in n for n in outcome.notes), outcome.notes
