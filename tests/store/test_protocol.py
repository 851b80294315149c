"""The public store protocol: its names, and an engine that needs nothing beyond it."""

from __future__ import annotations

import asyncio
import doctest
from pathlib import Path
from typing import Any

import durable
import durable.store
from durable.ops._verify import verify_run
from durable.store import Append, EventLog, MemoryLocks, MemoryLog, SqliteLog
from durable.store.conformance import PROTOCOL_METHODS, rows
from durable.testing import run_with_crash


def test_store_all_is_sorted_and_every_name_is_public() -> None:
    """``durable.store.__all__`` is sorted, complete, and its classes report a public module."""
    names = durable.store.__all__
    assert names == sorted(names)
    assert {"EventLog", "Append", "Row", "RunInfo", "Locks", "MemoryLog", "SqliteLog"} <= set(names)
    for name in names:
        obj = getattr(durable.store, name)
        if isinstance(obj, type):
            expected = "durable" if name in durable.__all__ else "durable.store"
            assert obj.__module__ == expected, name


def test_store_docstring_example_runs() -> None:
    """The example in the ``durable.store`` docstring gives the output it shows."""
    result = doctest.testmod(durable.store, raise_on_error=True)
    assert result.attempted > 0


def test_protocol_methods_are_exactly_the_protocol() -> None:
    """The conformance suite's method list names every method of ``EventLog`` and nothing else."""
    declared = {n for n, v in vars(EventLog).items() if callable(v) and not n.startswith("_")}
    assert declared == set(PROTOCOL_METHODS)


class ProtocolOnlyLog:
    """A log with the ``EventLog`` methods and nothing else: the engine finds no back door."""

    __slots__ = ("_inner", "calls")

    def __init__(self, inner: EventLog):
        self._inner = inner
        self.calls: set[str] = set()


def _forward(name: str) -> Any:
    def method(self: ProtocolOnlyLog, *args: Any, **kwargs: Any) -> Any:
        self.calls.add(name)
        return getattr(self._inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in PROTOCOL_METHODS:
    setattr(ProtocolOnlyLog, _name, _forward(_name))


@durable.step(max_visits=2)
async def double(x: int) -> int:
    return 2 * x


@durable.tool(idempotent=True)
async def record(x: int) -> int:
    return x + 1


@durable.workflow
async def flow(x: int) -> int:
    return await record(await double(x)) + await double(x + 1)


def test_the_engine_needs_nothing_beyond_the_protocol(tmp_path: Path) -> None:
    """Crash, resume, recover, compact, verify, vacuum and gc work on a log with only the protocol."""
    log = ProtocolOnlyLog(SqliteLog(tmp_path / "events.db"))
    world = durable.World(log, MemoryLocks())  # type: ignore[arg-type]
    crash = asyncio.run(run_with_crash(flow, 3, world=world, crash_after=3, run_id="r1"))
    assert crash.crashed
    assert asyncio.run(durable.run_workflow(flow, 3, world=world, run_id="r1")) == 15
    assert durable.recover("r1", world=world).terminal is not None
    durable.compact("r1", world=world)
    assert verify_run(world, "r1")["problems"] == []
    world.vacuum()
    assert durable.gc(world=world, older_than=0) == ["r1"]
    assert {"iter_rows", "integrity_check", "vacuum", "compact", "fence"} <= log.calls
    world.close()


def test_memory_log_integrity_check_names_a_gap() -> None:
    """``MemoryLog.integrity_check`` reports a run whose stored seqs skip one."""
    log = MemoryLog()
    token = log.fence("r1")
    log.append([Append("r1", rows(1, 3), token, created=("wf", None))])
    assert log.integrity_check() == "ok"
    del log._rows["r1"][1]  # damage the storage behind the protocol's back
    assert log.integrity_check() == "run 'r1': seq 3 follows seq 1"
