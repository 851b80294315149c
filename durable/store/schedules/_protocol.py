"""Schedules: the ``ScheduleStore`` protocol, ``MemorySchedules`` and ``SqliteSchedules``.

A schedule's record holds its definition (workflow name, cron or interval,
input, timezone, queue, catch-up mode), whether it is paused, and the last
tick a worker handled. Workers advance ``last_tick`` with a compare-and-set
(``advance``), and each tick's run has a deterministic id, so two workers on
one world never start a tick twice. ``SqliteSchedules`` keeps its table in
``runtime.db`` beside the runtime's control records.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from .._sqlite_file import SqliteFile


@dataclass(frozen=True)
class ScheduleRecord:
    """One schedule as a store keeps it.

    Attributes:
        name: The schedule's name (unique in the world).
        workflow: The recorded name of the workflow each tick starts.
        cron: A cron expression, or ``None`` for an interval.
        every: Seconds between ticks (aligned to the epoch), or ``None`` for a cron.
        input: The input of each tick's run, as JSON text.
        timezone: The IANA zone the cron expression is read in.
        queue: The queue each tick's run is enqueued on (``None``: a worker drives it).
        catch_up: ``latest``, ``all`` or ``none``: what to start for missed ticks.
        paused: A paused schedule starts no ticks (and misses them).
        last_tick: Unix time of the last tick handled (started or skipped).
        created_at: Unix time it was first stored.
        updated_at: Unix time of its last change.
    """

    name: str
    workflow: str
    cron: str | None = None
    every: float | None = None
    input: str = "null"
    timezone: str = "UTC"
    queue: str | None = None
    catch_up: str = "latest"
    paused: bool = False
    last_tick: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


class ScheduleStore(Protocol):
    """The protocol a world's schedule store implements (each method is one transaction)."""

    def upsert(self, record: ScheduleRecord) -> ScheduleRecord:
        """Store a schedule's definition; an existing one keeps ``paused``, ``last_tick`` and ``created_at``.

        Returns:
            The stored record.
        """

    def get(self, name: str) -> ScheduleRecord | None:
        """The schedule, or ``None``."""

    def all(self) -> list[ScheduleRecord]:
        """Every schedule, by name."""

    def set_paused(self, name: str, paused: bool, now: float) -> ScheduleRecord | None:
        """Pause or resume a schedule; ``None`` when there is none of that name."""

    def delete(self, name: str) -> bool:
        """Remove a schedule; whether there was one."""

    def advance(self, name: str, expected: float | None, tick: float, now: float) -> bool:
        """Set ``last_tick`` to ``tick`` if it still is ``expected`` (compare-and-set); say whether it was."""


class MemorySchedules:
    """Schedules held in this process (``memory_world``)."""

    def __init__(self) -> None:
        self._records: dict[str, ScheduleRecord] = {}
        self._mutex = threading.Lock()

    def close(self) -> None:
        """Nothing to release."""

    def upsert(self, record: ScheduleRecord) -> ScheduleRecord:
        with self._mutex:
            old = self._records.get(record.name)
            if old is not None:
                record = dataclasses.replace(
                    record, paused=old.paused, last_tick=old.last_tick, created_at=old.created_at
                )
            self._records[record.name] = record
            return record

    def get(self, name: str) -> ScheduleRecord | None:
        return self._records.get(name)

    def all(self) -> list[ScheduleRecord]:
        return [self._records[n] for n in sorted(self._records)]

    def set_paused(self, name: str, paused: bool, now: float) -> ScheduleRecord | None:
        with self._mutex:
            old = self._records.get(name)
            if old is None:
                return None
            new = self._records[name] = dataclasses.replace(old, paused=paused, updated_at=now)
            return new

    def delete(self, name: str) -> bool:
        with self._mutex:
            return self._records.pop(name, None) is not None

    def advance(self, name: str, expected: float | None, tick: float, now: float) -> bool:
        with self._mutex:
            old = self._records.get(name)
            if old is None or old.last_tick != expected:
                return False
            self._records[name] = dataclasses.replace(old, last_tick=tick, updated_at=now)
            return True


_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    cron TEXT,
    every REAL,
    input TEXT NOT NULL DEFAULT 'null',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    queue TEXT,
    catch_up TEXT NOT NULL DEFAULT 'latest',
    paused INTEGER NOT NULL DEFAULT 0,
    last_tick REAL,
    created_at REAL NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL DEFAULT 0
)
"""

_FIELDS = [f.name for f in dataclasses.fields(ScheduleRecord)]
_COLUMNS = ", ".join(_FIELDS)


def _record(row: tuple[Any, ...]) -> ScheduleRecord:
    values = list(row)
    values[_FIELDS.index("paused")] = bool(values[_FIELDS.index("paused")])
    return ScheduleRecord(*values)


class SqliteSchedules:
    """Schedules in a SQLite file (``runtime.db``), shared by every process of a data directory.

    Args:
        path: The database file (created when missing).
        busy_timeout: Milliseconds a writer waits for another one's transaction.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: int = 10_000):
        self._file = SqliteFile(path, _SCHEMA, "runtime store", busy_timeout=busy_timeout)
        self.path = self._file.path

    def upsert(self, record: ScheduleRecord) -> ScheduleRecord:
        def body(db: sqlite3.Connection) -> ScheduleRecord:
            row = db.execute(
                "SELECT paused, last_tick, created_at FROM schedules WHERE name = ?", (record.name,)
            ).fetchone()
            rec = record
            if row is not None:
                rec = dataclasses.replace(record, paused=bool(row[0]), last_tick=row[1], created_at=row[2])
            values = dataclasses.astuple(rec)
            db.execute(
                f"INSERT OR REPLACE INTO schedules ({_COLUMNS}) VALUES ({', '.join('?' * len(values))})",
                values,
            )
            return rec

        return self._file.tx(body)

    def get(self, name: str) -> ScheduleRecord | None:
        rows = self._file.read(f"SELECT {_COLUMNS} FROM schedules WHERE name = ?", (name,))
        return _record(rows[0]) if rows else None

    def all(self) -> list[ScheduleRecord]:
        return [_record(r) for r in self._file.read(f"SELECT {_COLUMNS} FROM schedules ORDER BY name")]

    def set_paused(self, name: str, paused: bool, now: float) -> ScheduleRecord | None:
        def body(db: sqlite3.Connection) -> ScheduleRecord | None:
            row = db.execute(
                f"UPDATE schedules SET paused = ?, updated_at = ? WHERE name = ? RETURNING {_COLUMNS}",
                (int(paused), now, name),
            ).fetchone()
            return _record(row) if row else None

        return self._file.tx(body)

    def delete(self, name: str) -> bool:
        def body(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount > 0

        return self._file.tx(body)

    def advance(self, name: str, expected: float | None, tick: float, now: float) -> bool:
        def body(db: sqlite3.Connection) -> bool:
            cur = db.execute(
                "UPDATE schedules SET last_tick = ?, updated_at = ? WHERE name = ? AND last_tick IS ?",
                (tick, now, name, expected),
            )
            return cur.rowcount > 0

        return self._file.tx(body)

    def close(self) -> None:
        """Close the connection."""
        self._file.close()
