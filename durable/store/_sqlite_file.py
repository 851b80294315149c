"""One SQLite file a store keeps its tables in, beside a data directory's ``events.db``.

Shared by the stores that live in a file of their own (``runtime.db``'s
schedules, ``threads.db``): the file is opened in WAL mode with the store's
schema, waiting up to ``busy_timeout`` for another process that holds it (a
full disk, a read-only file system or a missing permission is said at once,
through ``_sqlite_files``); a write is one ``BEGIN IMMEDIATE`` transaction;
reads and writes of the threads of one process take turns on the one
connection. A file (or journal) that is
a link is refused before SQLite opens it, as for every database of a data
directory.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import LogCorruptedError
from ..security import refuse_linked_database
from ._sqlite_files import busy, refused, stayed_locked

T = TypeVar("T")


class SqliteFile:
    """A store's SQLite file: its schema made, transactions and reads under one lock.

    Args:
        path: The database file (created when missing).
        schema: The ``CREATE TABLE IF NOT EXISTS`` statement of the store's table.
        what: What the file holds, for errors (``"runtime store"``, ``"thread store"``).
        busy_timeout: Milliseconds a writer waits for another one's transaction.
    """

    def __init__(self, path: str | os.PathLike[str], schema: str, what: str, *, busy_timeout: int = 10_000):
        self.path = Path(path)
        refuse_linked_database(self.path.parent, (), self.path.name)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout)}")
        deadline = time.monotonic() + busy_timeout / 1000
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(schema)
                return
            except sqlite3.OperationalError as exc:
                if busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                self._db.close()
                if busy(exc):
                    raise stayed_locked(self.path, busy_timeout, exc) from exc
                raise refused(self.path, exc) or self._unreadable(what, exc) from exc
            except sqlite3.DatabaseError as exc:
                self._db.close()
                raise self._unreadable(what, exc) from exc

    def _unreadable(self, what: str, exc: Exception) -> LogCorruptedError:
        return LogCorruptedError(f"{str(self.path)!r} is not a readable {what} ({exc}); move it aside.")

    def tx(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body(connection)`` in one ``BEGIN IMMEDIATE`` transaction; rolled back if it raises."""
        db = self._db
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                out = body(db)
                db.execute("COMMIT")
                return out
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def read(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of one query."""
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
