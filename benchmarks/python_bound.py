"""How close to the floor can any CPython step get? Bare steps beside durable's.

Run from the repository root: ``python benchmarks/python_bound.py [STEPS]``.

**Writing.** Three loops commit STEPS rows each to a fresh SQLite file in WAL
mode with ``synchronous=NORMAL``, in turns, in one process; every figure is
the median of seven rounds, in wall-clock time and in CPU time
(``time.process_time``, steadier on a shared machine):

- **floor**: one autocommitted ``INSERT`` of a fixed row per step (the
  ``(a) process`` floor of the harness);
- **bare step**: the least a durable step does in Python, with none of
  durable's checks: the call's path, the input's JSON and hash, a scope for
  the body in a context variable, the body awaited, the output's JSON and
  hash, the event's JSON, and one token-guarded ``INSERT``;
- **durable**: a ``@durable.step`` in a ``@durable.workflow`` with
  ``"process"`` durability.

The bare step's ratio to the floor is what interpreting that work costs in
CPython on this machine: a bound on target (a) that no Python code path
avoids, however lean.

**Replaying.** A run of STEPS steps that waits on ``durable.interrupt`` at
its end is resumed (every step replays), and so is one of no steps; their
difference per step is durable's replay cost. The *bare replay* does the
least a replay needs, on the same rows: read them, parse their JSON, index
them by path, then per call build the path, hash the input and compare it,
and return the recorded output. Both are shown above a plain ``await`` of an
undecorated function, as target (c) counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import pydantic_core

import durable
from durable.store.log._sqlite import _guarded_insert
from durable.store.log._sqlite_schema import _SCHEMA

STEPS = 2_000
"""Steps per loop (the first argument of the command line, read by ``main``)."""
ROUNDS = 7
_ROW = '{"path":"s.visit[0]","visit":0,"output":0,"output_hash":"0123456789abcdef0123456789abcdef"}'


Times = tuple[float, float]
"""Wall-clock and CPU time (``time.process_time``): seconds from ``_now``, microseconds from ``_since``."""


def _now() -> Times:
    return time.perf_counter(), time.process_time()


def _since(t0: Times, per: int = 1) -> Times:
    """Wall and CPU time since ``t0``, in microseconds per ``per`` steps."""
    wall, cpu = _now()
    return (wall - t0[0]) / per * 1e6, (cpu - t0[1]) / per * 1e6


def _db(dir: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(dir, "events.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)
    db.execute("INSERT INTO runs (run_id, token) VALUES ('r', 1)")
    return db


async def _floor(dir: str) -> float:
    db = _db(dir)
    t0 = _now()
    for i in range(STEPS):
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)", ("r", i + 1, "step.completed", _ROW, time.time())
        )
    return _since(t0, STEPS)


class _Scope:
    __slots__ = ("busy", "n", "prefix", "visits")

    def __init__(self, path: str):
        self.n = 0
        self.visits: dict[str, int] = {}
        self.prefix = path + "." if path else ""
        self.busy: str | None = None


async def _bare(dir: str) -> float:
    db = _db(dir)
    insert = _guarded_insert(1)
    scope_var: ContextVar[_Scope] = ContextVar("scope")
    to_json, blake2b = pydantic_core.to_json, hashlib.blake2b
    seq = [0]

    async def body(i: int) -> int:
        return i

    async def step(i: int) -> Any:
        scope = scope_var.get()
        if scope.busy is not None:
            raise RuntimeError("busy")
        n = scope.n
        scope.n = n + 1
        scope.busy = "step"
        visit = scope.visits.get("s", 0)
        scope.visits["s"] = visit + 1
        path = f"{scope.prefix}s.visit[{visit}]"
        input_hash = blake2b(to_json({"i": i}), digest_size=16).hexdigest()
        token = scope_var.set(_Scope(path))
        try:
            out = await body(i)
        finally:
            scope_var.reset(token)
        raw = to_json(out)
        seq[0] += 1
        event = {
            "path": path,
            "visit": visit,
            "attempt": 1,
            "input_hash": input_hash,
            "pos": n,
            "output": out,
            "output_hash": blake2b(raw, digest_size=16).hexdigest(),
            "state_version": seq[0],
        }
        db.execute(insert, ["r", 1, time.time(), seq[0], "step.completed", to_json(event).decode()])
        scope.busy = None
        return out

    scope_var.set(_Scope(""))
    t0 = _now()
    for i in range(STEPS):
        await step(i)
    return _since(t0, STEPS)


@durable.step(max_visits=10**7)
async def s(i: int) -> int:
    return i


@durable.workflow
async def steps(n: int) -> int:
    for i in range(n):
        await s(i)
    return n


@durable.workflow
async def steps_then_wait(n: int) -> int:
    for i in range(n):
        await s(i)
    durable.interrupt("done?")
    return n


async def plain(i: int) -> int:
    """An undecorated coroutine function: what a replayed call is counted above."""
    return i


async def _plain_loop() -> Times:
    t0 = _now()
    for i in range(STEPS):
        await plain(i)
    return _since(t0, STEPS)


def waiting_run(dir: str, n: int) -> None:
    """Make, in ``dir``, run ``"r"`` of ``n`` steps, left waiting on the interrupt at its end."""
    with durable.local_world(dir) as world, contextlib.suppress(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(steps_then_wait, n, world=world, run_id="r"))


def durable_replay(dir: str, n: int) -> Times:
    """Microseconds to resume the waiting run of ``n`` steps in ``dir``: every step replays."""
    with durable.local_world(dir) as world:
        t0 = _now()
        asyncio.run(durable.run_workflow(steps_then_wait, n, world=world, run_id="r", resume="yes"))
        return _since(t0)


def _bare_replay(dir: str) -> Times:
    db = sqlite3.connect(os.path.join(dir, "events.db"))
    to_json, from_json, blake2b = pydantic_core.to_json, pydantic_core.from_json, hashlib.blake2b

    async def replay() -> Times:
        t0 = _now()
        rows = db.execute("SELECT seq, type, data FROM events WHERE run_id = 'r' ORDER BY seq").fetchall()
        index = {}
        parsed = from_json("[" + ",".join([r[2] for r in rows]) + "]")
        for (_, type_, _), d in zip(rows, parsed, strict=True):
            if type_ == "step.completed":
                index[d["path"]] = d
        for i in range(STEPS):  # the i-th call of step s is its visit i
            d = index[f"s.visit[{i}]"]
            if d["input_hash"] != blake2b(to_json({"i": i}), digest_size=16).hexdigest():
                raise AssertionError(i)
            await plain(d["output"])
        return _since(t0, STEPS)

    times = asyncio.run(replay())
    db.close()
    return times


async def _durable(dir: str) -> Times:
    with durable.local_world(dir, durability="process") as world:
        await durable.run_workflow(steps, 3, world=world, run_id="warm")
        t0 = _now()
        await durable.run_workflow(steps, STEPS, world=world, run_id="r")
        return _since(t0, STEPS)


def _write_figures() -> dict[str, list[Times]]:
    loops = {"floor": _floor, "bare step": _bare, "durable": _durable}
    figures: dict[str, list[Times]] = {name: [] for name in loops}
    for r in range(ROUNDS):
        names = list(loops)[r % 3 :] + list(loops)[: r % 3]  # rotate the order each round
        for name in names:
            with tempfile.TemporaryDirectory() as dir:
                figures[name].append(asyncio.run(loops[name](dir)))
    return figures


def _replay_figures() -> dict[str, list[Times]]:
    figures: dict[str, list[Times]] = {"plain await": [], "bare replay": [], "durable replay": []}
    with tempfile.TemporaryDirectory() as full, tempfile.TemporaryDirectory() as empty:
        waiting_run(full, STEPS)
        waiting_run(empty, 0)
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
                shutil.copytree(full, a, dirs_exist_ok=True)
                shutil.copytree(empty, b, dirs_exist_ok=True)
                full_run, empty_run = durable_replay(a, STEPS), durable_replay(b, 0)
            figures["durable replay"].append(
                ((full_run[0] - empty_run[0]) / STEPS, (full_run[1] - empty_run[1]) / STEPS)
            )
            figures["bare replay"].append(_bare_replay(full))
            figures["plain await"].append(asyncio.run(_plain_loop()))
    return figures


def _table(
    header: str, figures: dict[str, list[Times]], base: Times, cell: Callable[[float, float], str]
) -> None:
    """One row per loop: the medians of its wall and CPU times, each beside ``cell`` of it and ``base``."""
    print(
        f"| {header} | CPU µs / step | CPU {header.rsplit('|', 1)[-1].strip()} |\n|---|---:|---:|---:|---:|"
    )
    for name, values in figures.items():
        wall, cpu = (statistics.median(v[i] for v in values) for i in (0, 1))
        print(f"| {name} | {cell(wall, base[0])} | {cell(cpu, base[1])} |")


def _medians(values: list[Times]) -> Times:
    return statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)


def main() -> None:
    global STEPS
    if len(sys.argv) > 1:
        STEPS = int(sys.argv[1])
    print(f"{STEPS} steps, median of {ROUNDS} rounds, µs per step (wall, then CPU)\n")
    written = _write_figures()
    floor = _medians(written["floor"])
    _table("loop | µs / step | ratio to floor", written, floor, lambda m, f: f"{m:.1f} | {m / f:.2f}×")
    replayed = _replay_figures()
    plain = _medians(replayed["plain await"])
    print()
    _table("replay | µs / step | above a plain await", replayed, plain, lambda m, p: f"{m:.2f} | {m - p:.2f}")


if __name__ == "__main__":
    main()
