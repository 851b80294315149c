"""Shrinking: a failing seed made into the smallest program and schedule that still fail the same way.

Each candidate is played again (its schedule given, nothing drawn) and kept
when its first violation is of the same kind. The candidates, tried until
none helps: an action less; a process that does not crash, or crashes
earlier; a node of the body (or of a step's or child's body) less; a
smaller loop, fan-out or sleep; no budget, no deadline; declarations no
node uses dropped.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from ._driver import simulate_one
from ._faults import Action
from ._program import Program, prune
from ._setup import Outcome, Setup, setup_of


def _schedules(schedule: list[Action]) -> Iterator[list[Action]]:
    for i in range(len(schedule)):
        if schedule[i][0] != "start":
            yield schedule[:i] + schedule[i + 1 :]
    for i, (kind, args) in enumerate(schedule):
        if args.get("crash_at"):
            for crash in (None, 1, args["crash_at"] // 2, args["crash_at"] - 1):
                if crash != args["crash_at"] and (crash is None or crash >= 1):
                    yield [*schedule[:i], [kind, {**args, "crash_at": crash}], *schedule[i + 1 :]]


def _lists(program: Program) -> Iterator[list[dict[str, Any]]]:
    """Every list of nodes in the program (the body, steps' and children's bodies, branches)."""

    def walk(nodes: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        yield nodes
        for n in nodes:
            for field in ("old", "new", "v1", "v2"):
                if isinstance(n.get(field), list):
                    yield from walk(n[field])

    yield from walk(program["body"])
    for section in ("steps", "children"):
        for decl in program[section].values():
            yield from walk(decl["body"])


def _programs(program: Program) -> Iterator[Program]:
    count = sum(len(nodes) for nodes in _lists(program))
    for index in range(count):  # a node less
        out = copy.deepcopy(program)
        seen = 0
        for nodes in _lists(out):
            if seen <= index < seen + len(nodes):
                del nodes[index - seen]
                break
            seen += len(nodes)
        yield prune(out)
    for key, smaller in (("budget", None), ("deadline", None)):
        if program[key] is not None:
            yield {**copy.deepcopy(program), key: smaller}
    for index in range(count):  # a node made smaller
        out = copy.deepcopy(program)
        seen = 0
        for nodes in _lists(out):
            if seen <= index < seen + len(nodes):
                n = nodes[index - seen]
                if n["op"] == "loop" and n["times"] > 1:
                    n["times"] -= 1
                elif n["op"] == "parallel" and len(n["items"]) > 1:
                    n["items"] = n["items"][:-1]
                elif n["op"] == "sleep" and n["seconds"] > 1:
                    n["seconds"] = 1
                else:
                    break
                yield out
                break
            seen += len(nodes)
    in_sync = {n["fn"] for d in program["steps"].values() if d["sync"] for n in d["body"] if "fn" in n}
    for name, decl in program["tools"].items():  # a tool made simpler
        for field, plain in (("retry", 0), ("flaky", 0), ("sync", False), ("undo", None)):
            if field == "sync" and name in in_sync:
                continue  # a sync step calls it: it stays sync
            if decl[field] != plain and not (field == "retry" and decl["flaky"]):
                out = copy.deepcopy(program)
                out["tools"][name][field] = plain
                yield prune(out)


def shrink(
    outcome: Outcome,
    program: Program,
    *,
    tries: int = 400,
    dsn: str | None = None,
    make_setup: Callable[[Program], Setup] = setup_of,
) -> tuple[Program, Outcome]:
    """The smallest program and schedule found that fail with ``outcome``'s first kind of violation.

    Args:
        outcome: A failing outcome of ``program``.
        program: Its program.
        tries: Simulations to try at most.
        dsn: The Postgres server, when the outcome's backend is ``postgres``.
        make_setup: How a program becomes what the simulation runs (``setup_of``).

    Returns:
        The shrunk program and the outcome of its schedule.
    """
    kind = outcome.signature
    backend = outcome.backend
    best_program, best = program, outcome

    def play(p: Program, schedule: list[Action]) -> Outcome | None:
        got = simulate_one(make_setup(p), backend=backend, schedule=schedule, dsn=dsn)
        return got if got.signature == kind else None

    left = tries
    improved = True
    while improved and left > 0:
        improved = False
        for schedule in _schedules(best.schedule):
            left -= 1
            got = play(best_program, schedule)
            if got is not None:
                best, improved = got, True
                break
            if left <= 0:
                break
        if improved:
            continue
        for p in _programs(best_program):
            left -= 1
            got = play(p, best.schedule)
            if got is not None:
                best_program, best, improved = p, got, True
                break
            if left <= 0:
                break
    return best_program, best
