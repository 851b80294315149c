"""Schedules: ``Schedule``, the ticks of a cron expression or an interval, and ``world.schedules``.

Each tick starts one run whose id is ``schedule:{name}:{tick}``, the tick in
ISO 8601 UTC to the second. The id is the guarantee: a tick's run is
submitted to the control store under that id, which stores a run id once,
so two workers that see the same tick start it once. Workers also advance
the schedule's ``last_tick`` with a compare-and-set, so that after a tick
is handled nobody computes it again.

Cron expressions are parsed and iterated by ``cronsim`` (in the timezone of
the schedule, daylight saving time included); intervals tick at the
multiples of ``every`` seconds since the epoch, so every worker computes the
same ticks.
"""

from __future__ import annotations

import builtins
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import cronsim

from ..engine import Spec, WorldCore, validate_input, workflow_spec
from ..errors import ConfigurationError
from ..store import (
    ControlRecord,
    EncryptedSchedules,
    MemoryLog,
    MemorySchedules,
    ScheduleRecord,
    ScheduleStore,
    SqliteSchedules,
)
from ._driver import control_of, runtime_of, seal_input
from ._handle import RunHandle

CATCH_UP = ("latest", "all", "none")
"""What a worker starts for ticks that passed while no worker ran (or the schedule was paused)."""

MISSED_AFTER = 60.0
"""Seconds after which a tick that no worker started counts as missed (``catch_up`` decides)."""

MAX_TICKS_PER_PASS = 1000
"""Ticks one pass starts at most for one schedule (``catch_up="all"`` after a long outage)."""


def tick_id(name: str, tick: float) -> str:
    """The run id of a schedule's tick: ``schedule:{name}:{ISO 8601 UTC to the second}``.

    Example:
        >>> tick_id("nightly", 1796094000.0)
        'schedule:nightly:2026-12-01T03:00:00Z'
    """
    return f"schedule:{name}:{datetime.fromtimestamp(tick, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def _zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError(
            f"Schedule timezone= takes an IANA zone such as 'Europe/Berlin', not {timezone!r}."
        ) from exc


def _every_seconds(every: Any) -> float:
    if isinstance(every, timedelta):
        every = every.total_seconds()
    if isinstance(every, bool) or not isinstance(every, int | float) or not math.isfinite(every):
        raise ConfigurationError(f"Schedule every= takes seconds or a timedelta, not {every!r}.")
    if every < 1 or every != int(every):
        raise ConfigurationError(
            "Schedule every= must be a whole number of seconds >= 1 (tick ids are to the "
            f"second), not {every!r}."
        )
    return float(every)


def ticks(record: ScheduleRecord, after: float, until: float) -> Iterator[float]:
    """The ticks of a schedule strictly after ``after`` and at or before ``until``, in order."""
    if record.every is not None:
        step = record.every
        t = (math.floor(after / step) + 1) * step
        while t <= until:
            yield t
            t += step
        return
    assert record.cron is not None
    zone = _zone(record.timezone)
    start = datetime.fromtimestamp(math.floor(after), UTC).astimezone(zone)
    for dt in cronsim.CronSim(record.cron, start):
        t = dt.timestamp()
        if t > until:
            return
        if t > after:
            yield t


@dataclass(frozen=True, init=False)
class Schedule:
    """A workflow started on a cron expression or every so many seconds, by a ``Worker``.

    Give it to ``Worker(schedules=[...])`` or create it at run time with
    ``world.schedules.create(...)``. Each tick starts one run with id
    ``schedule:{name}:{tick}`` (``schedule:nightly:2026-12-01T03:00:00Z``).

    Args:
        name: The schedule's name (no ``:``).
        wf: The ``@workflow`` each tick starts.
        cron: A cron expression (5 fields, or 6 with seconds first), read in ``timezone``.
        every: Seconds between ticks (or a ``timedelta``), aligned to the epoch.
        input: The input of every tick's run (validated now).
        timezone: The IANA zone of the cron expression.
        queue: A ``Queue`` or queue name the runs are enqueued on (``None``: a worker drives them).
        catch_up: For missed ticks (more than ``MISSED_AFTER`` seconds late, as
            after an outage or a pause): ``"latest"`` starts the most recent one
            when no later tick starts, ``"all"`` starts every one, ``"none"`` starts
            none. A tick at most ``MISSED_AFTER`` seconds late (a worker restart, a
            long pass) always starts.

    Raises:
        ConfigurationError: Not exactly one of ``cron`` and ``every``, a bad cron
            expression, zone, interval, name or catch-up mode.
        RunFailedError: The input is not valid for the workflow.
    """

    name: str
    wf: Any
    spec: Spec
    record: ScheduleRecord

    def __init__(
        self,
        name: str,
        wf: Any,
        *,
        cron: str | None = None,
        every: float | timedelta | None = None,
        input: Any = None,
        timezone: str = "UTC",
        queue: Any = None,
        catch_up: str = "latest",
    ):
        from ._queue import queue_name

        if not isinstance(name, str) or not name or ":" in name or "/" in name:
            raise ConfigurationError(
                f"a Schedule name is a non-empty string without ':' or '/', not {name!r}."
            )
        spec = workflow_spec(wf)
        if (cron is None) == (every is None):
            raise ConfigurationError(f"Schedule {name!r} takes exactly one of cron= and every=.")
        if catch_up not in CATCH_UP:
            raise ConfigurationError(f"Schedule catch_up= is one of {', '.join(CATCH_UP)}, not {catch_up!r}.")
        _zone(timezone)
        secs = None if every is None else _every_seconds(every)
        if cron is not None:
            try:
                cronsim.CronSim(cron, datetime.now(UTC))
            except cronsim.CronSimError as exc:
                raise ConfigurationError(
                    f"Schedule {name!r}: cron={cron!r} is not a cron expression ({exc})."
                ) from exc
        _, data, _ = validate_input(spec, input, f"schedule:{name}")
        record = ScheduleRecord(
            name,
            spec.name,
            cron=cron,
            every=secs,
            input=json.dumps(data),
            timezone=timezone,
            queue=queue_name(queue),
            catch_up=catch_up,
        )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "wf", wf)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "record", record)


def schedules_of(world: WorldCore) -> ScheduleStore:
    """The world's schedule store: the world's own (a Postgres table), else opened on first use.

    A local world keeps it in ``runtime.db`` beside ``events.db``; a memory world in memory.
    """
    store = world.schedule_store
    if store is None:
        if world.data_dir is not None:
            store = SqliteSchedules(world.data_dir / "runtime.db")
        elif keeps_schedules(world):
            store = MemorySchedules()
        else:  # a world of many processes without a schedule store of its own
            raise ConfigurationError(
                f"{world.where()} keeps no schedules (schedules live in a data directory, in "
                "memory or in a Postgres schema). Run the Worker that serves schedules on a "
                "local_world() or a postgres_world()."
            )
        codec = getattr(world, "codec", None)
        if codec is not None:  # an encrypted world's schedule inputs are encrypted too
            store = EncryptedSchedules(store, codec)
        world.schedule_store = store
    return store


def start_tick(world: WorldCore, record: ScheduleRecord, tick: float) -> str:
    """Submit the run of one tick (once: the control store keeps a run id once); return its id.

    A run without a queue is submitted as claimed by nobody, so the recovery
    pass of any worker that knows the workflow drives it.
    """
    rid = tick_id(record.name, tick)
    if world.log.info(rid) is not None:
        return rid
    now = world.clock()
    queued = record.queue is not None
    control_of(world).submit(
        ControlRecord(
            rid,
            record.workflow,
            input=seal_input(world, rid, record.input),  # as start_workflow seals it
            queue=record.queue,
            state="enqueued" if queued else "claimed",
            created_at=now,
            claimed_at=None if queued else now,
        )
    )
    return rid


def keeps_schedules(world: WorldCore) -> bool:
    """Whether the world has a place for schedules (a store of its own, a data directory, or memory)."""
    return (
        world.schedule_store is not None
        or world.data_dir is not None
        or isinstance(getattr(world.log, "inner", world.log), MemoryLog)
    )


def _due_ticks(rec: ScheduleRecord, last_tick: float, now: float) -> tuple[list[float], float | None]:
    """The ticks to start now, and the newest tick this pass handles (``None``: none is due).

    A tick at most ``MISSED_AFTER`` seconds late always starts (a worker
    restart or a long pass delays it, it is not missed); older ones follow
    ``catch_up``: ``all`` starts each, ``latest`` the newest of them when no
    later tick starts (that later run stands for them), ``none`` none. At
    most ``MAX_TICKS_PER_PASS`` start in one pass; the next pass goes on.
    """
    missed_before = now - MISSED_AFTER
    after = last_tick
    if rec.catch_up != "all" and rec.every is not None:
        # only the newest missed tick matters: skip the older ones without walking them
        after = max(after, math.floor(missed_before / rec.every) * rec.every - 2 * rec.every)
    chosen: list[float] = []
    newest_missed: float | None = None
    handled: float | None = None
    for t in ticks(rec, after, now):
        if t >= missed_before or rec.catch_up == "all":
            if len(chosen) >= MAX_TICKS_PER_PASS:
                break
            chosen.append(t)
        else:
            newest_missed = t
        handled = t
    if rec.catch_up == "latest" and newest_missed is not None and not chosen:
        chosen.insert(0, newest_missed)
    return chosen, handled


def schedule_pass(world: WorldCore, workflows: Iterable[str], now: float) -> list[str]:
    """Start the due ticks of every unpaused schedule of a known workflow; return the run ids started.

    A world without a place for schedules has none to start.
    """
    if not keeps_schedules(world):
        return []
    store = schedules_of(world)
    known = set(workflows)
    started: list[str] = []
    for rec in store.all():
        if rec.paused or rec.workflow not in known:
            continue
        if rec.last_tick is None:  # a new schedule: its ticks start from now
            store.advance(rec.name, None, now, now)
            continue
        chosen, handled = _due_ticks(rec, rec.last_tick, now)
        if handled is None:
            continue
        for t in chosen:
            started.append(start_tick(world, rec, t))
        store.advance(rec.name, rec.last_tick, handled, now)
    return started


def next_tick(world: WorldCore, workflows: Iterable[str], now: float) -> float | None:
    """The earliest tick after ``now`` of the unpaused schedules of ``workflows`` (``None``: no schedule)."""
    if not keeps_schedules(world):
        return None
    known = set(workflows)
    found: list[float] = []
    for rec in schedules_of(world).all():
        if rec.paused or rec.workflow not in known:
            continue
        after = max(now, rec.last_tick or now)
        upcoming = next(ticks(rec, after, after + 400 * 86400), None)  # cron ticks come at least yearly
        if upcoming is not None:
            found.append(upcoming)
    return min(found, default=None)


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as ``world.schedules.list()`` and ``little schedules`` show it.

    Attributes:
        name: The schedule's name.
        workflow: The workflow's recorded name.
        cron: Its cron expression, or ``None``.
        every: Its interval in seconds, or ``None``.
        timezone: The zone of the cron expression.
        queue: The queue of its runs.
        catch_up: ``latest``, ``all`` or ``none``.
        paused: Whether it is paused.
        handled_until: Every tick up to this moment is handled (started, or skipped by
            ``catch_up``), in ISO 8601 UTC; for a new schedule, when a worker first saw it.
        next_tick: The next tick, as its run id shows it (``2026-12-01T03:00:00Z``; ``None``
            while paused).
    """

    name: str
    workflow: str
    cron: str | None
    every: float | None
    timezone: str
    queue: str | None
    catch_up: str
    paused: bool
    handled_until: str | None
    next_tick: str | None


def _iso(t: float | None) -> str | None:
    return None if t is None else tick_id("", t).removeprefix("schedule::")


def describe(rec: ScheduleRecord, now: float) -> ScheduleInfo:
    """What a schedule record says, with its next tick after ``now`` (and after its last tick)."""
    nxt = None
    if not rec.paused:
        after = max(now, rec.last_tick or now)
        nxt = next(ticks(rec, after, math.inf), None)
    return ScheduleInfo(
        rec.name,
        rec.workflow,
        rec.cron,
        rec.every,
        rec.timezone,
        rec.queue,
        rec.catch_up,
        rec.paused,
        _iso(rec.last_tick),
        _iso(nxt),
    )


class Schedules:
    """``world.schedules``: create, list, pause, resume, delete and backfill schedules at run time.

    Every worker of the world picks changes up at its next pass; a worker
    starts the ticks of schedules whose workflow it knows.
    """

    def __init__(self, world: WorldCore):
        self.world = world
        self.store = schedules_of(world)

    def create(self, schedule: Schedule) -> ScheduleInfo:
        """Store a schedule (an existing one of that name takes the new definition and keeps its state)."""
        runtime_of(self.world).known[schedule.spec.name] = schedule.spec
        now = self.world.clock()
        rec = self.store.upsert(_stamped(schedule.record, now))
        return describe(rec, now)

    def list(self) -> list[ScheduleInfo]:
        """Every schedule, by name, with its next tick."""
        now = self.world.clock()
        return [describe(r, now) for r in self.store.all()]

    def get(self, name: str) -> ScheduleInfo:
        """One schedule, with its next tick.

        Raises:
            ConfigurationError: There is no schedule of that name.
        """
        rec = self.store.get(name)
        if rec is None:
            raise _missing(name)
        return describe(rec, self.world.clock())

    def pause(self, name: str) -> ScheduleInfo:
        """Stop starting ticks; ticks that pass while paused are missed (``catch_up`` decides at resume)."""
        rec = self.store.set_paused(name, True, self.world.clock())
        if rec is None:
            raise _missing(name)
        return describe(rec, self.world.clock())

    def resume(self, name: str) -> ScheduleInfo:
        """Start ticks again."""
        rec = self.store.set_paused(name, False, self.world.clock())
        if rec is None:
            raise _missing(name)
        return describe(rec, self.world.clock())

    def delete(self, name: str) -> None:
        """Remove the schedule; runs it started are left as they are."""
        if not self.store.delete(name):
            raise _missing(name)

    def backfill(self, name: str, start: datetime | float, end: datetime | float) -> builtins.list[RunHandle]:
        """Start the run of every tick from ``start`` to ``end`` (both ends included), ignoring ``catch_up``.

        A tick whose run exists already is not started again (its handle is returned).

        Args:
            name: The schedule.
            start: The first moment (an aware ``datetime`` or Unix time).
            end: The last moment.

        Returns:
            The handles of the ticks' runs, in tick order.
        """
        rec = self.store.get(name)
        if rec is None:
            raise _missing(name)
        lo, hi = _stamp(start), _stamp(end)
        return [RunHandle(start_tick(self.world, rec, t), self.world) for t in ticks(rec, lo - 1e-6, hi)]


def _stamp(t: datetime | float) -> float:
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ConfigurationError("backfill() takes aware datetimes (with a tzinfo), or Unix times.")
        return t.timestamp()
    return float(t)


def _stamped(rec: ScheduleRecord, now: float) -> ScheduleRecord:
    from dataclasses import replace

    return replace(rec, created_at=now, updated_at=now)


def _missing(name: str) -> ConfigurationError:
    return ConfigurationError(f"no schedule {name!r} in this world; list them with `little schedules`.")
