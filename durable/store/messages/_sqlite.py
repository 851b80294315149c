"""``SqliteMessages``: messages to runs in a table of ``events.db``, written through the log's connection.

The table lives in the log's own file so that ``consume`` can mark a message
consumed and append its ``message.received`` event in one ``BEGIN
IMMEDIATE`` transaction: a kill before the commit leaves both undone, a kill
after it leaves both done. The table is created on first use; a log without
it is an ordinary log (older SDKs ignore the table).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..._clock import wall
from ..log._protocol import Row, _stale, _taken
from ..log._sqlite import SqliteLog
from ..log._sqlite_errors import failure
from ..log._sqlite_schema import INSERT_EVENT
from ._protocol import Message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    topic TEXT,
    message_id TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    sent_at REAL NOT NULL DEFAULT 0,
    consumed_seq INTEGER
);
CREATE INDEX IF NOT EXISTS messages_waiting ON messages (run_id, topic, consumed_seq, id);
"""

_COLUMNS = "id, run_id, topic, message_id, data, sent_at, consumed_seq"


class SqliteMessages:
    """The message store of a ``SqliteLog``: a ``messages`` table in the same file.

    Args:
        log: The world's log; this store shares its connection and its lock.
    """

    def __init__(self, log: SqliteLog):
        self._log = log
        with log._lock:
            db = log._db
            try:
                db.execute("BEGIN IMMEDIATE")
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        db.execute(stmt)
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, log.path, None) from exc
                raise

    def _run(self, sql: str, args: tuple[Any, ...], run_id: str | None) -> list[Any]:
        log = self._log
        with log._lock:
            try:
                return log._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise failure(exc, log.path, run_id) from exc

    def send(self, run_id: str, topic: str | None, data: str, message_id: str, now: float) -> bool:
        rows = self._run(
            "INSERT INTO messages (run_id, topic, message_id, data, sent_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (message_id) DO NOTHING RETURNING id",
            (run_id, topic, message_id, data, now),
            run_id,
        )
        return bool(rows)

    def waiting(self, run_id: str, topic: str | None) -> bool:
        return bool(
            self._run(
                "SELECT 1 FROM messages WHERE run_id = ? AND topic IS ? AND consumed_seq IS NULL LIMIT 1",
                (run_id, topic),
                run_id,
            )
        )

    def consume(
        self, run_id: str, topic: str | None, token: int, build: Callable[[Message], Row]
    ) -> Message | None:
        log = self._log
        db = log._db
        with log._lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                got = db.execute(
                    f"SELECT {_COLUMNS} FROM messages WHERE run_id = ? AND topic IS ? "
                    "AND consumed_seq IS NULL ORDER BY id LIMIT 1",
                    (run_id, topic),
                ).fetchone()
                if got is None:
                    db.execute("ROLLBACK")
                    return None
                msg = Message(*got)
                row = db.execute("SELECT token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                current = row[0] if row else 0
                if current != token:
                    raise _stale(run_id, token, current)
                seq, type_, data = build(msg)
                try:
                    db.execute(
                        INSERT_EVENT,
                        (run_id, seq, type_, data, wall()),
                    )
                except sqlite3.IntegrityError:
                    raise _taken(run_id, seq) from None
                db.execute("UPDATE messages SET consumed_seq = ? WHERE id = ?", (seq, msg.id))
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:  # SQLite ends some failed transactions itself
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, log.path, run_id) from exc
                raise
        if log.checkpointer is not None:
            log.checkpointer.appended()
        return Message(msg.id, msg.run_id, msg.topic, msg.message_id, msg.data, msg.sent_at, seq)

    def messages(self, run_id: str, *, pending: bool = False) -> list[Message]:
        sql = f"SELECT {_COLUMNS} FROM messages WHERE run_id = ?"
        if pending:
            sql += " AND consumed_seq IS NULL"
        return [Message(*r) for r in self._run(sql + " ORDER BY id", (run_id,), run_id)]

    def delete_run(self, run_id: str) -> None:
        self._run("DELETE FROM messages WHERE run_id = ?", (run_id,), run_id)
