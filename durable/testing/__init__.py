"""Helpers to test your own durable code: simulated crashes, always-replay, a fake clock.

A durable workflow must give the same result however often its process dies.
These helpers let a test say so without spawning processes:

- ``run_with_crash`` runs a workflow whose process "dies" before the event
  log grows past ``crash_after`` events; resume it with ``run_workflow`` and
  the same ``run_id``, as a restarted process would.
- ``run_replaying_always`` lets every run commit exactly one transaction,
  then resumes it from the log, until it finishes: every committed event is
  followed by a full replay.
- ``replay_file`` replays a run exported with ``little export RUN_ID >
  run.json`` against the current code, with no world: recorded production
  runs kept as regression tests.
- ``FakeClock`` gives ``local_world``/``memory_world`` a clock and a sleep
  that never wait, for retries with backoff and ``durable.sleep``.
- ``virtual_time()`` runs worlds, workers and the whole runtime on a virtual
  clock that jumps to the next due time whenever nothing is ready to run:
  a month of ``durable.sleep`` takes a moment (``durable._clock``).

A simulated crash is a ``SimulatedCrash`` (a ``BaseException``, so user code's
``except Exception`` does not catch it) raised by the log in place of the
append that would cross the limit; that append and every later one write
nothing, exactly as in a killed process. Transactions stay whole: when the
limit falls inside one, none of it is written.

Example:
    >>> import asyncio, durable
    >>> from durable.testing import run_with_crash
    >>> @durable.step(max_visits=2)
    ... async def double(x: int) -> int:
    ...     return 2 * x
    >>> @durable.workflow
    ... async def wf(x: int) -> int:
    ...     return await double(x) + await double(x + 1)
    >>> world = durable.memory_world()
    >>> crash = asyncio.run(run_with_crash(wf, 1, world=world, crash_after=2, run_id="r1"))
    >>> crash.crashed
    True
    >>> asyncio.run(durable.run_workflow(wf, 1, world=world, run_id="r1"))
    6
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import World, run_workflow
from .._clock import VIRTUAL, VirtualClock
from ..errors import ConfigurationError
from ..store import Append, EventLog, MessageStore, Row, RunInfo, messages_for, row_times
from ..worlds import replay_file

__all__ = [
    "CrashResult",
    "CrashingLog",
    "FakeClock",
    "ReplayResult",
    "SimulatedCrash",
    "crashing_world",
    "replay_file",
    "run_replaying_always",
    "run_with_crash",
    "virtual_time",
]


def _new_run_id() -> str:
    return f"run_{uuid.uuid4().hex}"  # the form run_workflow gives a run without an id


class SimulatedCrash(BaseException):
    """The simulated process died here; nothing more reaches the log."""


class CrashingLog:
    """An ``EventLog`` that dies once a limit would be crossed, or before a chosen event.

    Args:
        inner: The log that keeps what was written (it survives the "crash").
        max_events: Events that may be written in all, or ``None`` for no limit.
        max_appends: Appends (transactions) that may be written, or ``None``.
        crash_before: ``(event type, payload) -> bool``; the first append holding an
            event it accepts dies before writing anything, e.g.
            ``lambda t, d: t == "step.completed" and d["path"] == "charge"``.

    Attributes:
        events_written: Events written through this wrapper so far.
        appends_written: Appends written through this wrapper so far.
        crashed: Whether the simulated crash happened.
    """

    def __init__(
        self,
        inner: EventLog,
        *,
        max_events: int | None = None,
        max_appends: int | None = None,
        crash_before: Callable[[str, dict[str, Any]], bool] | None = None,
    ):
        self.inner = inner
        self.crash_before = crash_before
        self.max_events = max_events
        self.max_appends = max_appends
        self.events_written = 0
        self.appends_written = 0
        self.crashed = False

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        """Write ``batch`` through to the inner log, or die before it crosses the limit."""
        rows = sum(len(a.rows) for a in batch)
        if (
            self.crashed
            or (self.max_events is not None and self.events_written + rows > self.max_events)
            or (self.max_appends is not None and self.appends_written + 1 > self.max_appends)
            or (
                self.crash_before is not None
                and any(self.crash_before(t, json.loads(d)) for a in batch for _, t, d in a.rows)
            )
        ):
            self.crashed = True
            raise SimulatedCrash(
                f"simulated crash after {self.events_written} events in {self.appends_written} appends"
            )
        self.inner.append(batch, sync=sync)
        self.events_written += rows
        self.appends_written += 1

    def message_store(self) -> MessageStore:
        """The inner log's message store (a consume commits there, past this wrapper)."""
        return messages_for(self.inner)

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """Read from the inner log."""
        return self.inner.read(run_id, after_seq)

    def times(self, run_id: str, after_seq: int = 0) -> dict[int, float]:
        """When the inner log wrote each row."""
        return row_times(self.inner, run_id, after_seq)

    def iter_rows(self, run_id: str, after_seq: int = 0) -> Iterator[Row]:
        """Stream from the inner log."""
        return self.inner.iter_rows(run_id, after_seq)

    def info(self, run_id: str) -> RunInfo | None:
        """The inner log's summary of a run."""
        return self.inner.info(run_id)

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """The inner log's runs."""
        return self.inner.runs(status=status, workflow=workflow, limit=limit, offset=offset, before=before)

    def count(self, *, status: str | None = None, workflow: str | None = None) -> int:
        """The inner log's count."""
        return self.inner.count(status=status, workflow=workflow)

    def fence(self, run_id: str) -> int:
        """Take a fencing token from the inner log (a dead process takes none)."""
        if self.crashed:
            raise SimulatedCrash("simulated crash: the process is gone")
        return self.inner.fence(run_id)

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Compact through the inner log (a dead process compacts nothing)."""
        if self.crashed:
            raise SimulatedCrash("simulated crash: the process is gone")
        self.inner.compact(run_id, snapshot, token)

    def delete_run(self, run_id: str) -> None:
        """Delete through the inner log."""
        self.inner.delete_run(run_id)

    def integrity_check(self) -> str:
        """The inner log's integrity check."""
        return self.inner.integrity_check()

    def vacuum(self) -> None:
        """Vacuum the inner log."""
        self.inner.vacuum()

    def close(self) -> None:
        """Leave the inner log open: it belongs to the world that made it."""


def crashing_world(
    world: World,
    *,
    max_events: int | None = None,
    max_appends: int | None = None,
    crash_before: Callable[[str, dict[str, Any]], bool] | None = None,
) -> World:
    """A view of ``world`` whose log dies at a limit or before a chosen event (see ``CrashingLog``).

    It shares everything else with ``world`` (locks, files, clock, sleep);
    after the crash, resume through ``world`` itself.
    """
    view = copy.copy(world)
    view.log = CrashingLog(
        world.log, max_events=max_events, max_appends=max_appends, crash_before=crash_before
    )
    return view


@dataclass(frozen=True)
class CrashResult:
    """What happened in ``run_with_crash``.

    Attributes:
        run_id: The run, to resume with ``run_workflow(..., run_id=run_id)``.
        crashed: Whether the crash happened (``False``: the run ended first).
        events_written: Events that reached the log during the call.
        output: The workflow's output when it finished before the crash.
    """

    run_id: str
    crashed: bool
    events_written: int
    output: Any = None


async def run_with_crash(
    wf: Any,
    input: Any = None,
    *,
    world: World,
    crash_after: int,
    run_id: str | None = None,
    models: dict[str, str] | None = None,
) -> CrashResult:
    """Run (or resume) a workflow whose process dies before the log grows past ``crash_after`` events.

    The events are counted over this call (child runs included). Any ``n`` is
    fine: when the limit falls inside a transaction, that transaction is not
    written, as in a real crash.

    Args:
        wf: A ``@workflow`` function.
        input: Its input.
        world: The world whose log survives the crash.
        crash_after: How many events may be written before the crash (``>= 0``).
        run_id: The run to start or resume (a new id when ``None``).
        models: Model slot mapping.

    Returns:
        A ``CrashResult``; a workflow that finishes first returns its output there.

    Raises:
        ConfigurationError: ``crash_after`` is not an int ``>= 0``.
        Exception: What the workflow itself raised, when no crash happened.
    """
    if not isinstance(crash_after, int) or isinstance(crash_after, bool) or crash_after < 0:
        raise ConfigurationError(f"crash_after must be an int >= 0, not {crash_after!r}.")
    rid = run_id if run_id is not None else _new_run_id()
    view = crashing_world(world, max_events=crash_after)
    log = view.log
    assert isinstance(log, CrashingLog)
    try:
        out = await run_workflow(wf, input, world=view, run_id=rid, models=models)
    except BaseException:
        if log.crashed:
            return CrashResult(rid, True, log.events_written)
        raise
    return CrashResult(rid, False, log.events_written, out)


@dataclass(frozen=True)
class ReplayResult:
    """What ``run_replaying_always`` saw.

    Attributes:
        run_id: The run.
        output: The workflow's output.
        resumes: How many times the run was resumed from its log.
    """

    run_id: str
    output: Any
    resumes: int


async def run_replaying_always(
    wf: Any,
    input: Any = None,
    *,
    world: World,
    run_id: str | None = None,
    models: dict[str, str] | None = None,
    max_resumes: int = 100_000,
) -> ReplayResult:
    """Run a workflow so that it is resumed from its log after every committed transaction.

    Each pass may write one transaction, then its process "dies" and the
    next pass resumes, replaying everything committed so far. Code that
    depends on anything the log does not record (a global counter, the wall
    clock, a dict's order built from timing) shows up as a different output
    or a ``NondeterminismError``.

    Args:
        wf: A ``@workflow`` function.
        input: Its input.
        world: Where the run lives.
        run_id: The run (a new id when ``None``).
        models: Model slot mapping.
        max_resumes: A guard against a run that never ends.

    Returns:
        The output and the number of resumes.

    Raises:
        RunInterrupted: The run waits for an answer; answer it with ``run_workflow(..., resume=)``.
        Exception: What the workflow itself raised.
    """
    rid = run_id if run_id is not None else _new_run_id()
    resumes = 0
    while True:
        view = crashing_world(world, max_appends=1)
        log = view.log
        assert isinstance(log, CrashingLog)
        try:
            out = await run_workflow(wf, input, world=view, run_id=rid, models=models)
        except BaseException:
            if not log.crashed:
                raise
        else:
            return ReplayResult(rid, out, resumes)
        resumes += 1
        if resumes > max_resumes:
            raise ConfigurationError(f"run {rid!r} did not finish within {max_resumes} resumes.")


class FakeClock:
    """A clock and a sleep for worlds in tests: sleeping advances the clock at once.

    Args:
        start: The clock's first reading (seconds since the epoch).

    Attributes:
        now: The current reading.
        slept: Every duration passed to ``sleep``, in order.

    Example:
        >>> import durable
        >>> clock = FakeClock()
        >>> world = durable.memory_world(clock=clock.time, sleep=clock.sleep)
    """

    def __init__(self, start: float = 1_800_000_000.0):
        self.now = float(start)
        self.slept: list[float] = []

    def time(self) -> float:
        """The current reading."""
        return self.now

    async def sleep(self, seconds: float) -> None:
        """Record ``seconds``, advance the clock by it, and yield to the event loop once."""
        self.slept.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Move the clock forward, as time passing while no process runs."""
        self.now += seconds


@contextlib.contextmanager
def virtual_time() -> Iterator[VirtualClock]:
    """Run durable, and the event loop it runs in, on a virtual clock while the block lasts.

    The clock reads the real clock plus every jump it made. Whenever its event
    loop has nothing ready to run (every run waits on a durable sleep, a
    ``recv`` or ``get_event`` timeout, a deadline, a schedule's next tick, a
    retry's backoff, a queue's rate limit, a worker's next poll), it jumps to
    the loop's next timer instead of waiting. Everything durable reads (the
    world's clock, the log's timestamps, ``durable.now()``) is that virtual
    time, so the log is the one a real clock would write, with virtual
    timestamps. The clock belongs to the current context: each test has its own.

    Entered inside a running event loop, it takes that loop at once; entered
    outside one (a pytest fixture, then ``asyncio.run``), it takes the loop at
    durable's first reading of the clock, so enter it before the loop starts
    timers of its own that must stay real.

    Yields:
        The ``VirtualClock`` (``now()``, ``skipped`` seconds, ``jumps``).

    Example:
        >>> import asyncio, durable
        >>> from durable.testing import virtual_time
        >>> @durable.workflow
        ... async def month(x: int) -> int:
        ...     await durable.sleep(30 * 86400)
        ...     return x
        >>> with virtual_time() as clock:
        ...     asyncio.run(durable.run_workflow(month, 1, world=durable.memory_world()))
        1
        >>> round(clock.skipped / 86400)  # days jumped (the real clock ran a little too)
        30
    """
    clock = VirtualClock()
    token = VIRTUAL.set(clock)
    try:
        clock.take_loop()
        yield clock
    finally:
        VIRTUAL.reset(token)
        clock.release()
