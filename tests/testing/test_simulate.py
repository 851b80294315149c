"""The simulator: generated workflows under crashes, deploys and decisions, its invariants, its shrunk tests.

``test_fixed_seeds_break_no_invariant`` is the simulation CI runs: a fixed
set of seeds on each backend, every invariant checked after every action.
A failure prints the shrunk test of its first seed, ready to paste into
``tests/``. ``python -m benchmarks.simulate --seeds N`` runs as many as time
allows.
"""

from __future__ import annotations

import doctest
import importlib
import random
from typing import Any

import pytest

import durable
from durable.testing.simulate import (
    Ledger,
    Outcome,
    Setup,
    explore,
    generate,
    printed_test,
    run_seed,
    setup_of,
    shrink,
    simulate,
    simulate_one,
)

SEEDS = {"memory": range(0, 160), "sqlite": range(10_000, 10_030), "postgres": range(20_000, 20_010)}
"""The seeds CI explores on each backend (about half a minute in all on two cores)."""


def _dsn(backend: str, request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("pg_server").dsn if backend == "postgres" else None


@pytest.mark.parametrize("backend", sorted(SEEDS))
def test_fixed_seeds_break_no_invariant(backend: str, request: pytest.FixtureRequest) -> None:
    """Every seed of the fixed set runs its generated workflow to an end that breaks no invariant."""
    dsn = _dsn(backend, request)
    report = explore(SEEDS[backend], backend=backend, dsn=dsn)
    assert report.seeds == len(SEEDS[backend])
    assert report.steps > report.seeds  # each seed took actions and checked after each
    if not report.ok:
        first = report.findings[0]
        pytest.fail(
            f"{report.summary()}\nseed {first.seed}: {first.outcome.violations}\n\n"
            f"Its shrunk test:\n\n{first.test(dsn=dsn, tries=60)}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_seeds_with_worker_processes_killed_for_real_break_no_invariant(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The slow mode: worker processes SIGKILL themselves at their crash points; nothing breaks."""
    dsn = _dsn(backend, request)
    report = explore(range(30_000, 30_004), backend=backend, dsn=dsn, sigkill=True)
    assert report.seeds == 4
    assert report.ok, [(f.seed, f.outcome.violations) for f in report.findings]


def _same(a: Outcome, b: Outcome) -> bool:
    return (a.schedule, a.violations, a.status) == (b.schedule, b.violations, b.status)


def test_a_seed_reproduces_its_program_schedule_and_findings() -> None:
    """The same seed draws the same program and the same actions, and meets the same end."""
    assert generate(7) == generate(7)
    assert generate(7) != generate(8)
    for seed in (3, 7, 12):
        assert _same(run_seed(seed), run_seed(seed))


def test_a_played_schedule_does_what_the_drawn_one_did() -> None:
    """A seed's schedule played again (nothing drawn) takes the same actions to the same end."""
    for seed in (4, 9):
        drawn = run_seed(seed)
        played = simulate_one(setup_of(generate(seed)), schedule=drawn.schedule)
        assert _same(drawn, played)


def test_the_printed_test_defines_the_code_the_simulation_ran() -> None:
    """A printed test's code and schedule, run from its own text, meet the end the simulation met."""
    for seed in (5, 11):
        program, outcome = generate(seed), run_seed(seed)
        text = printed_test(program, outcome, seed=seed)
        namespace: dict[str, Any] = {"__name__": "printed"}
        exec(compile(text, "printed.py", "exec"), namespace)
        setup = Setup(namespace["code"], input={"run": "sim-run"}, expect=outcome.setup.expect)
        again = simulate_one(setup, schedule=namespace["SCHEDULE"])
        assert _same(outcome, again)
        assert f"def test_simulated_seed_{seed}() -> None:" in text


class _TwiceLedger(Ledger):
    """A broken outside world: every tool call reaches it twice (a client that retries on its own)."""

    def effect(self, name: str, arg: Any = None, *, flaky: int = 0, result: Any = None) -> Any:
        super().effect(name, arg, flaky=flaky, result=result)
        return super().effect(name, arg, flaky=flaky, result=result)


def _twice(program: dict[str, Any]) -> Setup:
    made = setup_of(program)
    return Setup(made.code, input=made.input, expect=made.expect, ledger=_TwiceLedger())


def test_a_broken_outside_world_is_found_and_shrunk_to_a_small_test() -> None:
    """A plain side effect that happens twice is found, shrunk to a few calls, and printed as a test."""
    found = program = None
    for seed in range(100):
        program = generate(seed)
        found = simulate_one(_twice(program), seed=seed)
        if found.signature == "duplicate-effect":
            break
    assert found is not None
    assert program is not None
    assert found.signature == "duplicate-effect"
    small, outcome = shrink(found, program, make_setup=_twice)
    assert outcome.signature == "duplicate-effect"
    assert len(small["body"]) <= 2
    assert len(small["body"]) <= len(program["body"])
    assert len(outcome.schedule) <= len(found.schedule)
    text = printed_test(small, outcome, seed=seed)
    assert "duplicate-effect" in text
    assert "SCHEDULE = " in text


LEDGER = Ledger()


@durable.tool
async def charge(order: str) -> str:
    """A plain tool: its fake notes the charge in the ledger."""
    return LEDGER.effect("charge", order)


@durable.tool(idempotent=True)
async def refund(order: str, result: str) -> str:
    return LEDGER.undo("refund", order, result)


@durable.tool(compensate=refund)
async def reserve(order: str) -> str:
    return LEDGER.effect("reserve", order)


@durable.workflow
async def checkout(order: str) -> str:
    """A deterministic workflow: the simulator finds nothing wrong with it."""
    held = await reserve(order)
    await durable.sleep(60)
    return f"{held} {await charge(order)}"


@durable.workflow(name="checkout_random")
async def checkout_random(order: str) -> str:
    """A workflow whose body draws from ``random`` instead of ``durable.random()``: not replayable."""
    await reserve(order)
    if random.random() < 0.5:  # the bug: a resume may take the other path
        await durable.sleep(5)
    return await charge(order)


def test_your_own_deterministic_workflow_passes() -> None:
    """A user's workflow with fake tools explores crashes and decisions and breaks nothing."""
    report = simulate(checkout, "o1", seeds=range(25), ledger=LEDGER)
    assert report.seeds == 25
    assert report.ok, [f.outcome.violations for f in report.findings]


def test_your_own_workflow_that_reads_random_in_its_body_is_found() -> None:
    """A body that branches on ``random.random()`` is found: a resume meets a call the log lacks."""
    random.seed(1)
    report = simulate(checkout_random, "o1", seeds=range(60), ledger=LEDGER)
    kinds = {f.outcome.signature for f in report.findings}
    assert "nondeterminism" in kinds or "unreplayable" in kinds, report.summary()


@pytest.mark.parametrize("module", ["_driver", "_ledger"])
def test_docstring_examples_run(module: str) -> None:
    """Every ``>>>`` example of the simulator's modules gives the output it shows."""
    result = doctest.testmod(
        importlib.import_module(f"durable.testing.simulate.{module}"), raise_on_error=False
    )
    assert result.attempted > 0
    assert result.failed == 0


def test_a_program_prints_only_its_own_calls() -> None:
    """A name or argument that is not a plain word is refused (ConfigurationError), never printed as code."""
    program = generate(3)
    program["body"].append({"op": "tool", "fn": "print", "arg": "a1"})
    with pytest.raises(durable.ConfigurationError, match="does not declare"):
        setup_of(program)
    program = generate(3)
    program["body"].append({"op": "sleep", "seconds": 1, "arg": 'x"); import os; ("'})
    with pytest.raises(durable.ConfigurationError, match="plain words"):
        setup_of(program)
