"""A run durable's simulator broke (seed 85), shrunk.

What broke:

    unreplayable: the exported completed run replays under no version: v1: NondeterminismError:
    run 'sim-run': the code made a different durable call at effect 'tool:t0#1' than the log
    recorded.; v2: CapabilityDriftError: Run 'sim-run' was started with a different code or
    configuration.
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: tool_required)."""
    if version == 2:  # a deploy changes its signature

        @durable.tool(name="t0", reconcile=ledger.reconcile)
        async def t0(arg: str, fast: bool) -> str:
            return ledger.effect("t0", arg, flaky=0)
    else:

        @durable.tool(name="t0", reconcile=ledger.reconcile)
        async def t0(arg: str) -> str:
            return ledger.effect("t0", arg, flaky=0)

    @durable.workflow(name="sim")
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(durable.interrupt("a1"))
        out.append(await t0(*(("a3", True) if version == 2 else ("a3",))))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "worker", "crash_at": None}],
    ["worker", {"version": 1, "crash_at": None, "until": None}],
    ["deploy", {"mode": "replace", "crash_at": None, "until": None}],
    ["answer", {"value": "answer2", "crash_at": None, "until": None}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_run_started_by_v1_and_continued_by_v2_replays_under_the_code_that_made_it(backend: str) -> None:
    """Started by v1, answered and finished by v2: its export replays under a version of the code."""
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=None, calls_changed=True, in_flight=1),
        deadline=None,
        topics=(),
    )
    outcome = simulate_one(setup, backend=backend, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
