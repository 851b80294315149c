"""``SqliteOutbox``: outbox entries in a table of ``events.db``, written through the log's connection.

``enqueue`` appends the run's rows (the tool call's intent and receipt) and
inserts the entry in one ``BEGIN IMMEDIATE`` transaction, so a kill leaves
both or neither. The table is created on first use.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import Any

from ..._clock import wall
from ..log._protocol import Append, _stale, _taken
from ..log._sqlite import SqliteLog
from ..log._sqlite_errors import failure
from ..log._sqlite_schema import INSERT_EVENT
from ._protocol import OutboxEntry

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    owner TEXT,
    result TEXT,
    error TEXT,
    updated_at REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (state, next_at);
"""

_FIELDS = [f.name for f in dataclasses.fields(OutboxEntry)]
_COLUMNS = ", ".join(_FIELDS)


class SqliteOutbox:
    """The outbox of a ``SqliteLog``: an ``outbox`` table in the same file.

    Args:
        log: The world's log; this store shares its connection and its lock.
    """

    def __init__(self, log: SqliteLog):
        self._log = log
        self._tx(lambda db: [db.execute(s) for s in _SCHEMA.split(";") if s.strip()], None)

    def _tx(self, body: Any, run_id: str | None) -> Any:
        log = self._log
        db = log._db
        with log._lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                out = body(db)
                db.execute("COMMIT")
                return out
            except BaseException as exc:
                if db.in_transaction:  # SQLite ends some failed transactions itself
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, log.path, run_id) from exc
                raise

    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[OutboxEntry]:
        log = self._log
        with log._lock:
            try:
                return [OutboxEntry(*r) for r in log._db.execute(sql, args).fetchall()]
            except sqlite3.Error as exc:
                raise failure(exc, log.path, None) from exc

    def enqueue(self, append: Append, entry: OutboxEntry) -> None:
        def body(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT token FROM runs WHERE run_id = ?", (append.run_id,)).fetchone()
            current = row[0] if row else 0
            if current != append.token:
                raise _stale(append.run_id, append.token, current)
            at = wall()
            try:
                db.executemany(
                    INSERT_EVENT,
                    [(append.run_id, s, t, d, at) for s, t, d in append.rows],
                )
            except sqlite3.IntegrityError:
                raise _taken(append.run_id, append.rows[0][0]) from None
            values = dataclasses.astuple(entry)
            db.execute(
                f"INSERT INTO outbox ({_COLUMNS}) VALUES ({', '.join('?' * len(values))}) "
                "ON CONFLICT (key) DO NOTHING",
                values,
            )

        self._tx(body, append.run_id)
        if self._log.checkpointer is not None:
            self._log.checkpointer.appended()

    def due(self, now: float, limit: int = 100) -> list[OutboxEntry]:
        return self._rows(
            f"SELECT {_COLUMNS} FROM outbox WHERE state = 'pending' AND next_at <= ? "
            "ORDER BY next_at, created_at LIMIT ?",
            (now, limit),
        )

    def get(self, key: str) -> OutboxEntry | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM outbox WHERE key = ?", (key,))
        return rows[0] if rows else None

    def _update(self, key: str, where: str, sets: str, args: tuple[Any, ...]) -> OutboxEntry | None:
        def body(db: sqlite3.Connection) -> OutboxEntry | None:
            row = db.execute(
                f"UPDATE outbox SET {sets} WHERE key = ? {where} RETURNING {_COLUMNS}", (*args, key)
            ).fetchone()
            return OutboxEntry(*row) if row else None

        result: OutboxEntry | None = self._tx(body, None)
        return result

    def start_attempt(self, key: str, owner: str, now: float) -> OutboxEntry | None:
        return self._update(
            key, "AND state = 'pending'", "attempts = attempts + 1, owner = ?, updated_at = ?", (owner, now)
        )

    def deliver(self, key: str, result: str, now: float) -> None:
        self._update(key, "", "state = 'delivered', result = ?, error = NULL, updated_at = ?", (result, now))

    def fail(self, key: str, error: str, next_at: float | None, now: float) -> None:
        if next_at is None:
            self._update(key, "", "state = 'dead', error = ?, updated_at = ?", (error, now))
        else:
            self._update(
                key, "", "state = 'pending', error = ?, next_at = ?, updated_at = ?", (error, next_at, now)
            )

    def retry_dead(self, key: str, now: float) -> OutboxEntry | None:
        return self._update(
            key,
            "AND state = 'dead'",
            "state = 'pending', attempts = 0, next_at = ?, updated_at = ?",
            (now, now),
        )

    def entries(self, state: str | None = None, run_id: str | None = None) -> list[OutboxEntry]:
        sql = f"SELECT {_COLUMNS} FROM outbox WHERE 1 = 1"
        args: list[Any] = []
        if state is not None:
            sql += " AND state = ?"
            args.append(state)
        if run_id is not None:
            sql += " AND run_id = ?"
            args.append(run_id)
        return self._rows(sql + " ORDER BY created_at, key", tuple(args))

    def delete_run(self, run_id: str) -> None:
        self._tx(lambda db: db.execute("DELETE FROM outbox WHERE run_id = ?", (run_id,)), run_id)
