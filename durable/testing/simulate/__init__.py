"""Simulate workflows under crashes, deploys and decisions, and check what must always hold.

``explore(seeds)`` generates a workflow per seed from a grammar of every
kind of call and control durable has, runs it through the real runtime
(workers, queues, recovery) on a virtual clock, and takes the actions the
seed draws: processes that die at an append, second workers, deploys of
other code with old and new workers alive at once, and a person's
decisions (resolve, answer, cancel, resume, accept drift). After each
action it checks the invariants (``_invariants``). A failing seed shrinks
to a small program and schedule and prints as a pytest test
(``Finding.test()``). ``simulate(workflow, ...)`` explores your own
workflow the same way.
"""

from __future__ import annotations

from ._code import Code, SimulatedFailure
from ._driver import Simulation, simulate_one
from ._explore import Finding, Report, explore, run_seed, simulate
from ._invariants import Expect
from ._ledger import Effect, Ledger
from ._printer import printed_test
from ._program import generate
from ._setup import RUN, Outcome, Setup, setup_of
from ._shrink import shrink

__all__ = [
    "RUN",
    "Code",
    "Effect",
    "Expect",
    "Finding",
    "Ledger",
    "Outcome",
    "Report",
    "Setup",
    "SimulatedFailure",
    "Simulation",
    "explore",
    "generate",
    "printed_test",
    "run_seed",
    "setup_of",
    "shrink",
    "simulate",
    "simulate_one",
]
