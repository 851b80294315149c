"""What one queued run costs a SQLite worker: CPU time, commits and statements per run.

Run from the repository root::

    python -m benchmarks.run_cost [RUNS] [--opcodes]

For each durability (``process``, then ``power``) it enqueues RUNS one-step
runs on a fresh data directory, then drains them with a ``Worker`` in the
same process and prints, per run: the process's CPU time
(``time.process_time``, steadier than wall time on a shared machine), the
wall time, the commits of both files (``events.db`` and ``runtime.db``, an
autocommitted write counting as one) and the statements sent to SQLite. The
enqueueing is not counted. A third row runs ``"process"`` again with the
records ``little worker`` prints (its stderr handler, INFO and above, here
writing to ``os.devnull``) and counts them per run: what a worker's log
costs. ``--opcodes`` counts instead the Python opcodes
executed per run (worker and waiting client; ``sys.settrace``), an exact
figure where the CPU time carries the machine's noise. The same workflow serves ``python -m
benchmarks.runtime``, whose throughput scenario runs the worker in a process
of its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import durable
from benchmarks.systems.durable_rt import QUEUE, WORKFLOWS, one_step
from durable.cli._runtime import show_logs

_ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
RUNS = int(_ARGS[0]) if _ARGS else 500
OPCODES = "--opcodes" in sys.argv
_WRITES = ("INSERT", "UPDATE", "DELETE")


class Statements:
    """Counts what every SQLite connection opened while it is installed sends."""

    def __init__(self) -> None:
        self.kinds: collections.Counter[str] = collections.Counter()
        self.commits = 0
        self._connect = sqlite3.connect
        self._open: list[bool] = []

    def install(self) -> None:
        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            db = self._connect(*args, **kwargs)
            in_tx = [False]

            def seen(sql: str) -> None:
                word = sql.split(None, 1)[0].upper()
                self.kinds[word] += 1
                if word == "BEGIN":
                    in_tx[0] = True
                elif word in ("COMMIT", "END"):
                    in_tx[0] = False
                    self.commits += 1
                elif word in _WRITES and not in_tx[0]:
                    self.commits += 1  # autocommitted

            db.set_trace_callback(seen)
            return db

        sqlite3.connect = connect  # type: ignore[assignment]

    def reset(self) -> None:
        self.kinds.clear()
        self.commits = 0


def _opcode_counter(counted: list[int]) -> Any:
    """A ``sys.settrace`` function counting every opcode executed (the worker's and the client's)."""

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counted[0] += 1
        return tracer

    return tracer


class _Count(logging.Filter):
    """Counts the records a handler writes (it lets every one through)."""

    def __init__(self) -> None:
        super().__init__()
        self.records = 0

    def filter(self, record: logging.LogRecord) -> bool:
        self.records += 1
        return True


@contextlib.contextmanager
def logs(on: bool) -> Iterator[_Count | None]:
    """With ``on``, the ``durable`` logger prints as ``little worker`` sets it up, to ``os.devnull``."""
    if not on:
        yield None
        return
    logger = logging.getLogger("durable")
    old = logger.level
    with open(os.devnull, "w") as sink:
        handler, count = show_logs(sink), _Count()
        handler.addFilter(count)
        try:
            yield count
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old)


def measure(durability: str, stmts: Statements, logged: bool = False) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        durable.local_world(tmp, durability=durability) as world,  # type: ignore[arg-type]
        logs(logged) as handler,
    ):
        handles = [durable.start_workflow(one_step, i, world=world, queue=QUEUE) for i in range(RUNS)]

        async def drain() -> None:
            async with durable.Worker(world, workflows=WORKFLOWS, queues=[QUEUE]):
                for i, h in enumerate(handles):
                    assert await h.result(timeout=600) == i

        stmts.reset()
        if handler is not None:
            handler.records = 0
        counted = [0]
        if OPCODES:
            sys.settrace(_opcode_counter(counted))
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            asyncio.run(drain())
        finally:
            sys.settrace(None)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {
        "opcodes": counted[0] / RUNS,
        "cpu_us": cpu / RUNS * 1e6,
        "wall_us": wall / RUNS * 1e6,
        "commits": stmts.commits / RUNS,
        "statements": sum(stmts.kinds.values()) / RUNS,
        "records": handler.records / RUNS if handler is not None else 0.0,
    }


def main() -> None:
    stmts = Statements()
    stmts.install()
    if OPCODES:  # tracing slows everything down: only the counts mean something
        m = measure("process", stmts)
        print(f"queued run: {m['opcodes']:.0f} opcodes, {m['statements']:.1f} statements per run")
        return
    print(f"{RUNS} queued one-step runs drained by one in-process worker, per run\n")
    print(
        "| durability | CPU µs | wall µs | commits | statements | log records |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    for durability, logged in (("process", False), ("power", False), ("process", True)):
        m = measure(durability, stmts, logged)
        label = f"{durability}, little worker's log" if logged else durability
        print(
            f"| {label} | {m['cpu_us']:.0f} | {m['wall_us']:.0f} | {m['commits']:.2f} | "
            f"{m['statements']:.1f} | {m['records']:.1f} |"
        )


if __name__ == "__main__":
    main()
