"""``SqliteLog``: the event log in one SQLite file, in WAL mode.

Rows live in a ``WITHOUT ROWID`` table keyed by ``(run_id, seq)``, so a second
writer of the same seq fails instead of forking the log. Every append is one
``BEGIN IMMEDIATE`` transaction that also checks the writer's fencing token.
The schema version is kept in ``PRAGMA user_version``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import ConfigurationError, LogCorruptedError, LogFormatError
from ._protocol import Append, Row, RunInfo, _stale, _taken
from ._wal_checkpoints import SAFETY_NET_PAGES, Checkpointer

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    parent_run_id TEXT,
    created_at REAL NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL DEFAULT 0,
    token INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at DESC);
"""

_INFO_COLUMNS = "run_id, workflow, status, parent_run_id, created_at, updated_at"

DURABILITY_SYNC = {"process": "NORMAL", "power": "FULL"}

_ONE_STATEMENT_ROWS = 64
"""Appends up to this many rows are one statement; larger ones use a transaction."""


def _guarded_insert(n: int) -> str:
    """One ``INSERT`` of ``n`` rows that writes nothing unless the writer's token is current.

    Parameters: ``?1`` run id, ``?2`` token, then ``(seq, type, data)`` per row.
    A single statement is its own transaction, so the token check, the rows
    and the commit cost one call instead of four (``BEGIN``, ``SELECT``,
    ``INSERT``, ``COMMIT``).
    """
    values = ",".join(f"(?{3 * i + 3},?{3 * i + 4},?{3 * i + 5})" for i in range(n))
    return (
        "INSERT INTO events (run_id, seq, type, data) SELECT ?1, column1, column2, column3 "
        f"FROM (VALUES {values}) "
        "WHERE COALESCE((SELECT token FROM runs WHERE run_id = ?1), 0) = ?2"
    )


class SqliteLog:
    """The durable log in a SQLite file.

    Args:
        path: The database file (created when missing).
        durability: ``"process"`` (``synchronous=NORMAL``: survives any process
            kill) or ``"power"`` (``synchronous=FULL``: every commit is fsynced).
        busy_timeout: Milliseconds a writer waits for another one's transaction.

    Raises:
        LogCorruptedError: The file exists but is not a durable log.
        LogFormatError: The file was written by a newer, incompatible SDK.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "process",
        busy_timeout: int = 10_000,
    ):
        if durability not in DURABILITY_SYNC:
            raise ConfigurationError(f"durability must be 'process' or 'power', not {durability!r}")
        self.path = Path(path)
        self.durability = durability
        self._lock = threading.Lock()
        self._inserts: dict[int, str] = {}
        # "process" commits cost no fsync, so a checkpoint's two would stand out: they run
        # in the background. With "power" every commit waits on the disk already, and a
        # background checkpoint would compete with it for the disk: SQLite runs them inline.
        self.checkpointer = Checkpointer(self.path) if durability == "process" else None
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the event log {str(self.path)!r}: {exc}") from exc
        try:
            self._setup(busy_timeout)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise LogCorruptedError(
                f"{str(self.path)!r} is not a readable durable log ({exc}). Nothing was written "
                "to it. Move it aside to start a new log, or restore it from a backup."
            ) from exc

    def _setup(self, busy_timeout: int) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout={int(busy_timeout)}")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LogFormatError(
                f"{str(self.path)!r} has log schema version {version}, written by a newer "
                f"durable; this one reads version {SCHEMA_VERSION}. Upgrade little-workflow."
            )
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and version == 0 and "events" not in tables:
            raise sqlite3.DatabaseError("the database holds other tables and no durable log")
        if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
            raise sqlite3.DatabaseError("WAL journal mode is not available for this file")
        db.execute(f"PRAGMA synchronous={DURABILITY_SYNC[self.durability]}")
        if self.checkpointer is not None:
            db.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
        if version < SCHEMA_VERSION:
            db.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")

    # -- writing -------------------------------------------------------------

    def append(self, batch: Sequence[Append]) -> None:
        """Write every append of ``batch`` in one transaction, or none of them."""
        if len(batch) == 1:
            a = batch[0]
            if a.created is None and a.status is None and 0 < len(a.rows) <= _ONE_STATEMENT_ROWS:
                self._append_rows(a)
                return
        db = self._db
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                for a in batch:
                    if a.created is not None:
                        db.execute(
                            "INSERT INTO runs (run_id, workflow, status, parent_run_id, "
                            "created_at, updated_at, token) VALUES (?, ?, 'running', ?, ?, ?, 0) "
                            "ON CONFLICT (run_id) DO UPDATE SET workflow = excluded.workflow, "
                            "parent_run_id = excluded.parent_run_id, "
                            "created_at = excluded.created_at, updated_at = excluded.updated_at",
                            (a.run_id, a.created[0], a.created[1], now, now),
                        )
                    row = db.execute("SELECT token FROM runs WHERE run_id = ?", (a.run_id,)).fetchone()
                    current = row[0] if row else 0
                    if current != a.token:
                        raise _stale(a.run_id, a.token, current)
                    try:
                        db.executemany(
                            "INSERT INTO events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
                            [(a.run_id, s, t, d) for s, t, d in a.rows],
                        )
                    except sqlite3.IntegrityError:
                        raise _taken(a.run_id, a.rows[0][0]) from None
                    if a.status is not None:
                        db.execute(
                            "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?",
                            (a.status, now, a.run_id),
                        )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        if self.checkpointer is not None:
            self.checkpointer.appended()

    def _append_rows(self, a: Append) -> None:
        """The common append (rows only) as one autocommitted, token-guarded statement."""
        n = len(a.rows)
        sql = self._inserts.get(n)
        if sql is None:
            sql = self._inserts[n] = _guarded_insert(n)
        params: list[object] = [a.run_id, a.token]
        for row in a.rows:
            params += row
        with self._lock:
            try:
                written = self._db.execute(sql, params).rowcount
            except sqlite3.IntegrityError:
                raise _taken(a.run_id, a.rows[0][0]) from None
            if written != n:  # the guard matched nothing: another driver holds the run
                row = self._db.execute("SELECT token FROM runs WHERE run_id = ?", (a.run_id,)).fetchone()
                raise _stale(a.run_id, a.token, row[0] if row else 0)
        if self.checkpointer is not None:
            self.checkpointer.appended()

    def fence(self, run_id: str) -> int:
        """Take a new fencing token for a run; every older token becomes stale."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT INTO runs (run_id, token) VALUES (?, 0) ON CONFLICT (run_id) DO NOTHING",
                    (run_id,),
                )
                token = db.execute(
                    "UPDATE runs SET token = token + 1 WHERE run_id = ? RETURNING token", (run_id,)
                ).fetchone()[0]
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return int(token)

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Append ``snapshot`` and delete every row of the run strictly before it."""
        db = self._db
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                current = row[0] if row else 0
                if current != token:
                    raise _stale(run_id, token, current)
                try:
                    db.execute(
                        "INSERT INTO events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
                        (run_id, *snapshot),
                    )
                except sqlite3.IntegrityError:
                    raise _taken(run_id, snapshot[0]) from None
                db.execute("DELETE FROM events WHERE run_id = ? AND seq < ?", (run_id, snapshot[0]))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def delete_run(self, run_id: str) -> None:
        """Remove a run and its rows."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
                db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def vacuum(self) -> None:
        """Give the file space of deleted rows back to the file system."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")
            # In WAL mode VACUUM writes the rebuilt file through the WAL: check it back in.
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- reading -------------------------------------------------------------

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """All rows of a run above ``after_seq``, in seq order, in one query."""
        with self._lock:
            return self._db.execute(
                "SELECT seq, type, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after_seq),
            ).fetchall()

    def iter_rows(self, run_id: str, after_seq: int = 0, chunk: int = 4096) -> Iterator[Row]:
        """The rows of ``read``, fetched ``chunk`` rows per query as they are consumed.

        A resume indexes a long run without holding all of its raw rows at
        once. The chunks are consistent with each other because only the
        run's lock holder writes the run. No lock or statement stays open
        between chunks, so an abandoned iterator holds nothing.
        """
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT seq, type, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                    (run_id, after_seq, chunk),
                ).fetchall()
            yield from rows
            if len(rows) < chunk:
                return
            after_seq = rows[-1][0]

    def info(self, run_id: str) -> RunInfo | None:
        """The run's summary, or ``None`` when the log has no such run."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {_INFO_COLUMNS} FROM runs WHERE run_id = ? AND workflow != ''", (run_id,)
            ).fetchone()
        return RunInfo(*row) if row else None

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[RunInfo]:
        """Runs, newest first, optionally filtered by status and workflow."""
        sql = f"SELECT {_INFO_COLUMNS} FROM runs WHERE workflow != ''"
        args: list[object] = []
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        if workflow is not None:
            sql += " AND workflow = ?"
            args.append(workflow)
        sql += " ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        with self._lock:
            return [RunInfo(*r) for r in self._db.execute(sql, args)]

    def integrity_check(self) -> str:
        """SQLite's own ``PRAGMA integrity_check`` answer (``"ok"`` when sound)."""
        with self._lock:
            return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        """Stop the background checkpoints and close the connection."""
        if self.checkpointer is not None:
            self.checkpointer.close()
        with self._lock:
            self._db.close()
