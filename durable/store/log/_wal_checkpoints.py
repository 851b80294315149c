"""Checkpoints of a SQLite log's write-ahead log, off the writer's path.

In WAL mode every commit appends to ``events.db-wal``; a checkpoint copies
those pages back into ``events.db`` and syncs both files. SQLite runs it
inside whichever commit crosses ``wal_autocheckpoint`` pages, so one step in
about a thousand would wait for two ``fsync`` calls. A ``Checkpointer`` runs
the checkpoint on its own connection in a background thread instead (SQLite
releases the GIL while it works): commits stay commits. The writer keeps a
much higher ``wal_autocheckpoint`` as a safety net, should this thread fall
behind.

Only ``"process"`` logs use one: with ``"power"`` every commit waits on the
disk already, and a background checkpoint would compete with it for the
disk (measured: the two-commit steps of a tool call got about 1.5x slower).

A checkpoint changes nothing a reader or a crash can see: committed rows are
in the WAL until they are copied, and in the database file after.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

EVERY = 500
"""Appends between two background checkpoints (a few pages each)."""

SAFETY_NET_PAGES = 10_000
"""The writer's own ``wal_autocheckpoint``: it checkpoints inline only past this."""


class Checkpointer:
    """A daemon thread that checkpoints one database file every ``every`` appends.

    Args:
        path: The database file.
        every: Appends between checkpoints.

    The thread starts with the first append that calls for a checkpoint, so a
    log that is only read never starts one; ``close`` stops it.
    """

    def __init__(self, path: Path, every: int = EVERY):
        self._path = path
        self._every = every
        self._count = 0
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.checkpoints = 0
        """Checkpoints run so far (for tests and diagnostics)."""

    def appended(self) -> None:
        """Count one append; wake the thread when a checkpoint is due."""
        self._count += 1
        if self._count >= self._every:
            self._count = 0
            self.request()

    def request(self) -> None:
        """Ask for a checkpoint now (starting the thread if needed)."""
        with self._lock:
            if self._closing:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="durable-checkpoint", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout=1000")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                try:
                    # PASSIVE never blocks the writer; what it cannot copy now waits for the next.
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error:
                    pass
        finally:
            db.close()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running) and wait for it."""
        with self._lock:
            self._closing = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()
