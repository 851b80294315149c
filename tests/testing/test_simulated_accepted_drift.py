"""A run durable's simulator broke (seed 419), shrunk.

What broke:

    nondeterminism: the run is blocked for nondeterminism after accepting
    ['tools.t1.signature'], but every version makes the same calls: run 'sim-run': the code made
    a different durable call at effect 'tool:t1#0' than the log recorded.   recorded:  tool 't1'
    at 'tool:t1#0' (input 218311dffd83)   attempted: tool 't1' at 'tool:t1#0' (inp
"""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.testing.simulate import Code, Expect, Ledger, Setup, simulate_one


def code(version: int, ledger: Ledger) -> Code:
    """Version 1 or 2 of the simulated code (version 2: tool_default)."""
    if version == 2:  # a deploy changes its signature

        @durable.tool(
            name="t1",
            idempotent=True,
            retry=durable.RetryPolicy(max_attempts=3, backoff=0.5, retry_on=ConnectionError),
        )
        async def t1(arg: str, fast: bool = False) -> str:
            return ledger.effect("t1", arg, flaky=2)
    else:

        @durable.tool(
            name="t1",
            idempotent=True,
            retry=durable.RetryPolicy(max_attempts=3, backoff=0.5, retry_on=ConnectionError),
        )
        async def t1(arg: str) -> str:
            return ledger.effect("t1", arg, flaky=2)

    @durable.workflow(name="sim")
    async def sim(inp: dict[str, str]) -> list[Any]:
        out: list[Any] = []
        out.append(await t1("a2"))
        return out

    return Code(version, sim, {})


SCHEDULE = [
    ["start", {"via": "worker", "crash_at": None}],
    ["worker", {"version": 1, "crash_at": 5, "until": 0.5}],
    ["worker", {"version": 2, "crash_at": None, "until": None}],
    ["resume", {"accept": True, "budget": False, "crash_at": None, "until": None}],
]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_an_accepted_drift_of_a_tool_that_gained_a_defaulted_parameter_resumes_the_run(backend: str) -> None:
    """A tool gains a defaulted parameter; the v2 worker's drift accepted, the run resumes, not blocked."""
    setup = Setup(
        code,
        input={"run": "sim-run"},
        expect=Expect(budget=None, calls_changed=False, in_flight=1),
        deadline=None,
        topics=(),
    )
    outcome = simulate_one(setup, backend=backend, schedule=SCHEDULE)
    assert outcome.violations == [], outcome.violations
