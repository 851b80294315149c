"""``SqliteThreads``: a world's threads in ``threads.db`` beside its ``events.db``.

Every process of a data directory opens the same file (WAL); a write is one
``BEGIN IMMEDIATE`` transaction. A key is stored once per thread (a unique
index); ``replace`` is an upsert that keeps the row's ``seq``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

from .._sqlite_file import SqliteFile
from ._protocol import Order, ThreadItem, check_order

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    thread TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    UNIQUE (namespace, thread, key)
)
"""


class SqliteThreads:
    """Threads in a SQLite file, shared by every process of a data directory.

    Args:
        path: The database file (created when missing).
        busy_timeout: Milliseconds a writer waits for another one's transaction.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: int = 10_000):
        self._file = SqliteFile(path, _SCHEMA, "thread store", busy_timeout=busy_timeout)
        self.path = self._file.path

    def close(self) -> None:
        """Close the database file."""
        self._file.close()

    def write(
        self,
        namespace: str,
        thread: str,
        items: Sequence[tuple[str, bytes]] = (),
        *,
        replace: bool = False,
        delete: Sequence[str] = (),
    ) -> None:
        conflict = "DO UPDATE SET value = excluded.value" if replace else "DO NOTHING"

        def body(db: sqlite3.Connection) -> None:
            db.executemany(
                "DELETE FROM threads WHERE namespace = ? AND thread = ? AND key = ?",
                [(namespace, thread, k) for k in delete],
            )
            db.executemany(
                "INSERT INTO threads (namespace, thread, key, value) VALUES (?, ?, ?, ?) "
                f"ON CONFLICT (namespace, thread, key) {conflict}",
                [(namespace, thread, k, bytes(v)) for k, v in items],
            )

        self._file.tx(body)

    def get(self, namespace: str, thread: str, key: str) -> ThreadItem | None:
        rows = self._file.read(
            "SELECT key, value, seq FROM threads WHERE namespace = ? AND thread = ? AND key = ?",
            (namespace, thread, key),
        )
        return ThreadItem(rows[0][0], bytes(rows[0][1]), rows[0][2]) if rows else None

    def items(
        self,
        namespace: str,
        thread: str,
        *,
        prefix: str = "",
        order: Order = "seq",
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[ThreadItem]:
        check_order(order)
        direction = "DESC" if newest_first else "ASC"
        rows = self._file.read(
            "SELECT key, value, seq FROM threads WHERE namespace = ? AND thread = ? "
            f"AND substr(key, 1, ?) = ? ORDER BY {order} {direction} LIMIT ?",
            (namespace, thread, len(prefix), prefix, -1 if limit is None else limit),
        )
        return [ThreadItem(k, bytes(v), s) for k, v, s in rows]

    def delete_thread(self, namespace: str, thread: str) -> None:
        self._file.tx(
            lambda db: db.execute(
                "DELETE FROM threads WHERE namespace = ? AND thread = ?", (namespace, thread)
            )
        )

    def threads(self, namespace: str) -> list[str]:
        rows = self._file.read(
            "SELECT DISTINCT thread FROM threads WHERE namespace = ? ORDER BY thread", (namespace,)
        )
        return [r[0] for r in rows]
