"""``SqliteControl``: the runtime's control records in ``runtime.db``, beside ``events.db``.

Every worker process of a data directory opens the same file, so a queue's
limits are checked inside one ``BEGIN IMMEDIATE`` transaction across all of
them. Its schema and migrations are in ``_sqlite_schema``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from ...errors import LogCorruptedError
from ...security import refuse_linked_database
from .._sqlite_files import busy, refused, stayed_locked
from ._doorbell import Doorbell
from ._protocol import (
    ControlRecord,
    QueueLimits,
    WorkerRecord,
    _partition_free,
    _room,
    adopted,
    announcing,
    changed,
    claimed_by,
    debounced,
    kinds_of,
    record_of,
    reopened,
)
from ._sqlite_schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._sqlite_schema import migrate

_PAUSE_MIN = 0.00005
_PAUSE_MAX = 0.001
"""The first and the longest pause (seconds) between two tries to begin a write."""

_FIELDS = [f.name for f in dataclasses.fields(ControlRecord)]
_COLUMNS = ", ".join(_FIELDS)
_SUBMIT = (
    f"INSERT INTO control ({_COLUMNS}) SELECT "
    + ", ".join("(SELECT COALESCE(MAX(seq), 0) + 1 FROM control)" if f == "seq" else "?" for f in _FIELDS)
    + " WHERE NOT EXISTS (SELECT 1 FROM control WHERE run_id = ?) RETURNING seq"
)
"""A new record, unless the run has one: one statement, which also takes the next ``seq``."""
_SUBMITTED = [f for f in _FIELDS if f != "seq"]

_record = record_of


class SqliteControl:
    """Control records in a SQLite file (WAL), shared by every process of a data directory.

    Args:
        path: The database file (created when missing).
        busy_timeout: Milliseconds a writer waits for another one's transaction.

    Raises:
        LogCorruptedError: The file is not a control store.
        LogFormatError: The file was written by a newer SDK.
        LogUnavailableError: Another process kept the new file locked while it was set up.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: int = 10_000):
        self.path = Path(path)
        refuse_linked_database(self.path.parent, (), self.path.name)
        self._bell = Doorbell(self.path.parent / "bells")
        self._busy_ms = int(busy_timeout)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self._open(busy_timeout)
        except BaseException:
            self._db.close()
            raise

    def _open(self, busy_timeout: int) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout={int(busy_timeout)}")
        deadline = time.monotonic() + busy_timeout / 1000
        while True:
            try:
                if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
                    raise LogCorruptedError(f"{str(self.path)!r}: WAL journal mode is not available")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("BEGIN IMMEDIATE")
                try:
                    migrate(db, self.path)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                return
            except sqlite3.OperationalError as exc:
                if not busy(exc):
                    raise refused(self.path, exc) or self._unreadable(exc) from exc
                if time.monotonic() >= deadline:
                    raise stayed_locked(self.path, busy_timeout, exc) from exc
                time.sleep(0.005)
            except sqlite3.DatabaseError as exc:
                raise self._unreadable(exc) from exc

    def _unreadable(self, exc: Exception) -> LogCorruptedError:
        return LogCorruptedError(
            f"{str(self.path)!r} is not a readable control store ({exc}); move it aside "
            "(queued runs that never started are lost; started runs stay in events.db)."
        )

    def _tx(self) -> _Tx:
        return _Tx(self)

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, retried after short pauses while another process writes (``_retried``)."""
        self._retried("BEGIN IMMEDIATE", ())

    def _retried(self, sql: str, params: Sequence[object]) -> list[Any]:
        """One statement that takes the write lock, retried after short pauses while another process writes.

        SQLite's own busy handler sleeps a whole millisecond (then 2, 5, 10...)
        after a first collision, although the other process's transactions
        here last tens of microseconds; a worker and the process enqueueing
        into its queue collide often, and each collision then cost a
        millisecond on both sides. The handler is off for this statement only.
        """
        db = self._db
        db.execute("PRAGMA busy_timeout=0")
        try:
            give_up = time.monotonic() + self._busy_ms / 1000
            pause = _PAUSE_MIN
            while True:
                try:
                    return db.execute(sql, params).fetchall()
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() >= give_up:
                        raise
                time.sleep(pause)
                pause = min(pause * 2, _PAUSE_MAX)
        finally:
            db.execute(f"PRAGMA busy_timeout={self._busy_ms}")

    def _get(self, run_id: str) -> ControlRecord | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM control WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _record(row)

    def _put(self, rec: ControlRecord) -> ControlRecord:
        marks = ", ".join("?" for _ in _FIELDS)
        self._db.execute(
            f"INSERT OR REPLACE INTO control ({_COLUMNS}) VALUES ({marks})",
            tuple(getattr(rec, name) for name in _FIELDS),  # astuple deep-copies every field
        )
        return rec

    def _next_seq(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM control").fetchone()[0])

    def submit(self, record: ControlRecord) -> ControlRecord:
        out = self._submit(record)
        if record.queue is not None:  # a run without a queue is this process's: no worker claims it
            self._announce("q")
        return out

    def _submit(self, record: ControlRecord) -> ControlRecord:
        if record.dedup_id is None and record.debounce_key is None:
            with self._lock:  # the common submit: one statement, its own transaction
                made = self._retried(_SUBMIT, (*(getattr(record, f) for f in _SUBMITTED), record.run_id))
                if made:
                    return changed(record, seq=made[0][0])
                old = self._get(record.run_id)
            if old is not None:
                return old
        with self._tx():
            old = self._get(record.run_id)
            if old is not None:
                return old
            if record.dedup_id is not None:
                row = self._db.execute(
                    f"SELECT {_COLUMNS} FROM control WHERE queue IS ? AND dedup_id = ? "
                    "AND state IN ('enqueued', 'claimed', 'blocked', 'waiting') LIMIT 1",
                    (record.queue, record.dedup_id),
                ).fetchone()
                if row is not None:
                    return _record(row)
            if record.debounce_key is not None:
                row = self._db.execute(
                    f"SELECT {_COLUMNS} FROM control WHERE queue IS ? AND debounce_key = ? "
                    "AND state = 'enqueued' LIMIT 1",
                    (record.queue, record.debounce_key),
                ).fetchone()
                if row is not None:
                    return self._put(debounced(_record(row), record))
            return self._put(changed(record, seq=self._next_seq()))

    def get(self, run_id: str) -> ControlRecord | None:
        with self._lock:
            return self._get(run_id)

    def claim(
        self,
        limits: QueueLimits,
        *,
        owner: str,
        pid: int,
        host: str,
        room: int,
        now: float,
        workflows: Collection[str] | None = None,
    ) -> list[ControlRecord]:
        db = self._db
        with self._tx():
            inflight = db.execute(
                "SELECT COUNT(*) FROM control WHERE queue = ? AND state = 'claimed'", (limits.name,)
            ).fetchone()[0]
            claims: list[float | None] = []
            if limits.rate_limit is not None:
                claims = [
                    r[0]
                    for r in db.execute(
                        "SELECT claimed_at FROM control WHERE queue = ? AND claimed_at > ?",
                        (limits.name, now - limits.rate_limit[1]),
                    )
                ]
            room = _room(limits, room, inflight, claims, now)
            if room <= 0:
                return []
            parts: dict[str | None, int] = {}
            if limits.partition_concurrency is not None:
                for key, n in db.execute(
                    "SELECT partition_key, COUNT(*) FROM control WHERE queue = ? AND state = 'claimed' "
                    "GROUP BY partition_key",
                    (limits.name,),
                ):
                    parts[key] = n
            scan = room if limits.partition_concurrency is None else max(room * 8, 64)
            names = sorted(workflows) if workflows is not None else []
            only = f"AND workflow IN ({','.join('?' for _ in names)}) " if workflows is not None else ""
            waiting = [
                _record(r)
                for r in db.execute(
                    f"SELECT {_COLUMNS} FROM control WHERE queue = ? AND state = 'enqueued' {only}"
                    "AND (start_at IS NULL OR start_at <= ?) ORDER BY priority, seq LIMIT ?",
                    (limits.name, *names, now, scan),
                )
            ]
            out: list[ControlRecord] = []
            for r in waiting:
                if len(out) >= room:
                    break
                if not _partition_free(limits, parts, r.partition_key):
                    continue
                parts[r.partition_key] = parts.get(r.partition_key, 0) + 1
                out.append(claimed_by(r, owner, pid, host, now))
            db.executemany(
                "UPDATE control SET state = 'claimed', owner = ?, pid = ?, host = ?, claimed_at = ?, "
                "drives = drives + 1, driven_at = ? WHERE run_id = ?",
                [(owner, pid, host, now, now, r.run_id) for r in out],
            )
            return out

    def adopt(
        self, run_id: str, workflow: str, *, owner: str, pid: int, host: str, now: float
    ) -> ControlRecord:
        with self._tx():
            old = self._get(run_id)
            if old is None:
                old = ControlRecord(run_id, workflow, created_at=now, seq=self._next_seq())
            return self._put(adopted(old, workflow, owner, pid, host, now))

    def finish(self, run_id: str, state: str) -> None:
        self.finish_many([(run_id, state)])

    @announcing("rf")
    def finish_many(self, ends: Sequence[tuple[str, str]]) -> None:
        with self._tx():
            self._db.executemany(
                "UPDATE control SET state = ?, cancel_reason = NULL, resume = NULL, drives = 0, "
                "blocked = NULL WHERE run_id = ?",
                [(state, run_id) for run_id, state in ends],
            )

    def delete(self, run_ids: Sequence[str]) -> None:
        with self._tx():
            self._db.executemany("DELETE FROM control WHERE run_id = ?", [(r,) for r in run_ids])

    @announcing("rf")
    def block(self, run_id: str, blocked: str) -> None:
        with self._tx():
            self._db.execute(
                "UPDATE control SET state = 'blocked', blocked = ? WHERE run_id = ?", (blocked, run_id)
            )

    @announcing("rf")
    def wait_for_code(self, run_id: str, waiting: str) -> None:
        with self._tx():
            self._db.execute(
                "UPDATE control SET state = 'waiting', owner = NULL, pid = NULL, host = NULL, blocked = ? "
                "WHERE run_id = ?",
                (waiting, run_id),
            )

    def uncount(self, run_id: str) -> None:
        with self._tx():
            self._db.execute("UPDATE control SET drives = MAX(drives - 1, 0) WHERE run_id = ?", (run_id,))

    @announcing("cr")
    def request_cancel(self, run_id: str, reason: str, now: float) -> ControlRecord:
        with self._tx():
            old = self._get(run_id)
            if old is None:
                old = ControlRecord(run_id, "", state="claimed", created_at=now, seq=self._next_seq())
            if old.state == "enqueued":
                return self._put(dataclasses.replace(old, state="cancelled", cancel_reason=reason))
            if old.state in ("done", "cancelled"):
                return old
            return self._put(dataclasses.replace(old, cancel_reason=reason))

    def cancel_requests(self, run_ids: Iterable[str]) -> dict[str, str]:
        # Every pending cancellation of the store (through its partial index, usually none),
        # then those asked about: a driver's watch reads this at every ring of the doorbell,
        # which rings for any change, with every run it drives.
        wanted = run_ids if isinstance(run_ids, (set, frozenset, dict)) else set(run_ids)
        with self._lock:
            pending = self._db.execute(
                "SELECT run_id, cancel_reason FROM control "
                "WHERE cancel_reason IS NOT NULL AND state = 'claimed'"
            ).fetchall()
        return {rid: reason for rid, reason in pending if rid in wanted}

    @announcing("qr")
    def reopen(self, run_id: str, resume: str | None) -> ControlRecord | None:
        with self._tx():
            old = self._get(run_id)
            if old is None:
                return None
            state = "enqueued" if old.queue is not None else "claimed"
            return self._put(reopened(old, state, resume))

    def claimed(self) -> list[ControlRecord]:
        with self._lock:
            return [
                _record(r)
                for r in self._db.execute(f"SELECT {_COLUMNS} FROM control WHERE state = 'claimed'")
            ]

    def waiting_records(self) -> list[ControlRecord]:
        with self._lock:
            return [
                _record(r)
                for r in self._db.execute(f"SELECT {_COLUMNS} FROM control WHERE state = 'waiting'")
            ]

    def blocked_records(self) -> list[ControlRecord]:
        with self._lock:
            return [
                _record(r)
                for r in self._db.execute(f"SELECT {_COLUMNS} FROM control WHERE state = 'blocked'")
            ]

    def records(self, run_ids: Sequence[str]) -> dict[str, ControlRecord]:
        out: dict[str, ControlRecord] = {}
        ids = list(run_ids)
        with self._lock:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" for _ in chunk)
                for r in self._db.execute(f"SELECT {_COLUMNS} FROM control WHERE run_id IN ({marks})", chunk):
                    rec = _record(r)
                    out[rec.run_id] = rec
        return out

    def unstarted(self) -> list[ControlRecord]:
        with self._lock:
            return [
                _record(r)
                for r in self._db.execute(
                    f"SELECT {_COLUMNS} FROM control WHERE claimed_at IS NULL "
                    "AND state IN ('enqueued', 'cancelled') ORDER BY seq"
                )
            ]

    def register_worker(self, worker: WorkerRecord) -> None:
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO workers (name, pid, host, started_at, code, queues) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    worker.name,
                    worker.pid,
                    worker.host,
                    worker.started_at,
                    worker.code,
                    json.dumps(worker.queues),
                ),
            )

    def unregister_worker(self, name: str) -> None:
        with self._tx():
            self._db.execute("DELETE FROM workers WHERE name = ?", (name,))

    def workers(self) -> list[WorkerRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT name, pid, host, started_at, code, queues FROM workers ORDER BY name"
            ).fetchall()
        return [
            WorkerRecord(n, pid, host, at, code, tuple(json.loads(qs))) for n, pid, host, at, code, qs in rows
        ]

    def version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _announce(self, kinds: str) -> None:
        self._bell.ring(kinds)

    def subscribe(
        self, on_change: Callable[[], None], about: Collection[str] = ()
    ) -> Callable[[], None] | None:
        return self._bell.listen(on_change, kinds_of(about))  # kinds only: any run's end wakes run:<id>

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._bell.close()


class _Tx:
    """One ``BEGIN IMMEDIATE`` transaction under the connection's thread lock."""

    def __init__(self, store: SqliteControl):
        self.store = store

    def __enter__(self) -> None:
        self.store._lock.acquire()
        try:
            self.store._begin()
        except BaseException:
            self.store._lock.release()
            raise

    def __exit__(self, et: object, e: object, tb: object) -> None:
        try:
            self.store._db.execute("COMMIT" if et is None else "ROLLBACK")
        finally:
            self.store._lock.release()
