"""What a simulation runs (``Setup``) and what it found (``Outcome``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._code import Factory, factory
from ._faults import Action
from ._invariants import CALLS_CHANGED, Expect
from ._ledger import Ledger
from ._program import Program, nodes_of

RUN = "sim-run"
"""The id of the simulated run."""


@dataclass(frozen=True)
class Setup:
    """What a simulation runs, besides its schedule.

    Attributes:
        code: ``code(version, ledger)``, the factory of each version of the code.
        input: The workflow's input.
        expect: What the checks must know (``Expect``): the budget, whether version 2 changes the calls.
        deadline: The run's ``deadline=`` (seconds), or ``None``.
        topics: The topics the run receives messages on (a person may send to them).
        versions: 2 when a deploy may bring version 2 of the code, else 1.
        ledger: The ledger the code's fakes note into (``None``: a new one given to ``code``).
        program: The generated program the code is made of (worker processes build it again).
    """

    code: Factory
    input: Any = None
    expect: Expect = field(default_factory=Expect)
    deadline: float | None = None
    topics: tuple[str, ...] = ()
    versions: int = 2
    ledger: Ledger | None = None
    program: Program | None = None


def setup_of(program: Program) -> Setup:
    """What a simulation of a generated program runs: its code, its input and what the checks expect."""
    budget = program["budget"]
    widths = [len(n["items"]) for n in nodes_of(program) if n["op"] == "parallel"]
    return Setup(
        code=factory(program),
        input={"run": RUN},
        expect=Expect(
            budget=None if budget is None else budget["max_model_calls"],
            calls_changed=program["change"] in CALLS_CHANGED,
            in_flight=max(widths or [1]),
        ),
        deadline=program["deadline"],
        topics=tuple(n["topic"] for n in nodes_of(program) if n["op"] == "recv"),
        program=program,
    )


@dataclass
class Outcome:
    """What one simulation did and found.

    Attributes:
        setup: What it ran.
        backend: ``memory``, ``sqlite`` or ``postgres``.
        schedule: The actions taken, in order (replayable).
        violations: Each invariant broken, one line each (empty: none).
        steps: Checks made (one after each action, and the final ones).
        status: The run's status at the end.
        notes: What each action met, one line each (for the printed test's comments).
    """

    setup: Setup
    backend: str
    schedule: list[Action] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    steps: int = 0
    status: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def signature(self) -> str:
        """The first violation's kind (the text before its colon), to tell findings apart."""
        return self.violations[0].split(":", 1)[0] if self.violations else ""
