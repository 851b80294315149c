"""Exploring seeds: generated programs, or your own workflow, under the faults each seed draws.

``explore`` runs one simulation per seed and collects what broke;
``run_seed`` is one generated program's simulation; ``simulate`` explores
your own workflow. A failure is shrunk (``shrink``) and printed as a test
(``printed_test``) by ``Finding.test``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from durable import ConfigurationError

from ._code import Code
from ._driver import simulate_one
from ._invariants import Expect
from ._ledger import Ledger
from ._printer import printed_test
from ._program import Program, generate
from ._setup import Outcome, Setup, setup_of
from ._shrink import shrink


@dataclass
class Finding:
    """A seed that broke an invariant.

    Attributes:
        seed: The seed.
        outcome: Its outcome (``violations`` says what broke).
        seconds: Seconds from the start of the exploration until it was found.
        program: Its generated program (``None`` for your own workflow).
    """

    seed: int
    outcome: Outcome
    seconds: float
    program: Program | None = None

    def test(self, *, shrunk: bool = True, dsn: str | None = None, tries: int = 400) -> str:
        """The failure as a pytest module (shrunk first, with at most ``tries`` simulations).

        Raises:
            ConfigurationError: The finding is of your own workflow, not a generated program.
        """
        if self.program is None:
            raise ConfigurationError(
                "only a generated program prints as a test; play your own again with "
                "simulate_one(setup, schedule=finding.outcome.schedule)."
            )
        program, outcome = self.program, self.outcome
        if shrunk:
            program, outcome = shrink(outcome, program, dsn=dsn, tries=tries)
        return printed_test(program, outcome, seed=self.seed)


@dataclass
class Report:
    """What an exploration did.

    Attributes:
        seeds: Seeds simulated.
        steps: Checks made over all of them (one after each action, and the final ones).
        seconds: Wall-clock seconds it took.
        findings: The seeds that broke an invariant.
    """

    seeds: int = 0
    steps: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no seed broke an invariant."""
        return not self.findings

    def summary(self) -> str:
        """One line: seeds, seeds per second, steps, findings."""
        rate = self.seeds / self.seconds if self.seconds else 0.0
        return (
            f"{self.seeds} seeds in {self.seconds:.1f} s ({rate:.1f} seeds/s), {self.steps} steps, "
            f"{len(self.findings)} broke an invariant"
        )


def run_seed(
    seed: int, *, backend: str = "memory", dsn: str | None = None, size: int = 6, sigkill: bool = False
) -> Outcome:
    """The simulation of the program ``seed`` generates, under the faults ``seed`` draws.

    ``sigkill``: worker processes of their own, killed for real (SQLite or Postgres, real clock).
    """
    program = generate(seed, size, fast=sigkill)
    return simulate_one(setup_of(program), backend=backend, seed=seed, dsn=dsn, sigkill=sigkill)


def explore(
    seeds: Iterable[int],
    *,
    backend: str = "memory",
    dsn: str | None = None,
    size: int = 6,
    setup: Setup | None = None,
    budget_seconds: float | None = None,
    stop_at_first: bool = False,
    on_finding: Callable[[Finding], None] | None = None,
    sigkill: bool = False,
) -> Report:
    """Simulate each seed (a generated program, or ``setup`` under each seed's faults); report what broke.

    Args:
        seeds: The seeds.
        backend: ``memory``, ``sqlite`` or ``postgres``.
        dsn: The Postgres server, for ``postgres``.
        size: About how many calls a generated workflow body makes.
        setup: Your own code under simulation (see ``simulate``); ``None``: generated programs.
        budget_seconds: Stop after about this many seconds.
        stop_at_first: Stop at the first finding.
        on_finding: Called with each finding as it is found.
        sigkill: Workers are processes of their own, SIGKILLed for real, on the real clock
            (generated programs with short sleeps, on SQLite or Postgres): the slow mode.
    """
    report = Report()
    start = time.monotonic()
    for seed in seeds:
        if budget_seconds is not None and time.monotonic() - start > budget_seconds:
            break
        program = generate(seed, size, fast=sigkill) if setup is None else None
        made = setup if setup is not None else setup_of(program)  # type: ignore[arg-type]
        got = simulate_one(made, backend=backend, seed=seed, dsn=dsn, sigkill=sigkill)
        report.seeds += 1
        report.steps += got.steps
        if got.violations:
            finding = Finding(seed, got, time.monotonic() - start, program)
            report.findings.append(finding)
            if on_finding is not None:
                on_finding(finding)
            if stop_at_first:
                break
    report.seconds = time.monotonic() - start
    return report


def simulate(
    workflow: Any,
    input: Any = None,
    *,
    seeds: Iterable[int] = range(50),
    ledger: Ledger | None = None,
    version2: Any = None,
    backend: str = "memory",
    dsn: str | None = None,
    budget: int | None = None,
    deadline: float | None = None,
    topics: Iterable[str] = (),
    calls_changed: bool = False,
) -> Report:
    """Explore your own workflow under crashes, workers, deploys and a person's decisions.

    Each seed runs the workflow once through the real runtime on a virtual
    clock: processes that die at an append, second workers, cancellations,
    answers to interrupts, resolutions of unknown commits, resumes, and (with
    ``version2``) a deploy of other code with old and new workers alive at
    once. After each action the invariants are checked: no plain side effect
    twice, every run ends or says why, compensations once each newest first,
    budgets held, the run replays under its code.

    Args:
        workflow: Your ``@workflow``.
        input: Its input.
        seeds: The seeds to explore.
        ledger: The ``Ledger`` your fake tools and model calls note their side
            effects into (``ledger.effect(...)`` as a tool's body); without one only
            the run's own invariants are checked.
        version2: The ``@workflow`` as the next deploy defines it (same name).
        backend: ``memory``, ``sqlite`` or ``postgres``.
        dsn: The Postgres server, for ``postgres``.
        budget: ``max_model_calls`` of the run's budget.
        deadline: The run's deadline in seconds.
        topics: Topics the run receives messages on (a person sends to them).
        calls_changed: ``version2`` changes the calls runs make (runs of version 1
            may then not replay under it).

    Returns:
        The ``Report``; ``report.ok`` when nothing broke.
    """

    def code(version: int, unused: Ledger) -> Code:  # your fakes note into the ledger they hold
        return Code(version, workflow if version == 1 else version2)

    setup = Setup(
        code,
        input=input,
        expect=Expect(budget=budget, calls_changed=calls_changed),
        deadline=deadline,
        topics=tuple(topics),
        versions=2 if version2 is not None else 1,
        ledger=ledger,
    )
    return explore(seeds, backend=backend, dsn=dsn, setup=setup)
