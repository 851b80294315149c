"""The SQLite log's file: its schema, and how a file is recognised and set up when it is opened.

A file is opened only if it is new or holds the log's own tables at a
version this SDK reads; anything else is refused before a byte is written.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ...errors import LogCorruptedError, LogFormatError, LogUnavailableError
from .._sqlite_files import busy, refused, stayed_locked
from ._wal_checkpoints import SAFETY_NET_PAGES

SCHEMA_VERSION = 2
"""Version 2 added ``events.written_at``, the time each row was committed."""

INSERT_EVENT = "INSERT INTO events (run_id, seq, type, data, written_at) VALUES (?, ?, ?, ?, ?)"
"""One event row and the time of its transaction (every row of one commit gets the same)."""

_COLUMNS = {
    "events": {"run_id", "seq", "type", "data"},
    "runs": {"run_id", "workflow", "status", "parent_run_id", "created_at", "updated_at", "token"},
}
"""The columns of the log's own tables: a file without them is not a durable log."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    written_at REAL,
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
CREATE INDEX IF NOT EXISTS runs_by_parent ON runs (parent_run_id);
"""

_ADDED = """
ALTER TABLE runs ADD COLUMN code TEXT;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created_at DESC, run_id DESC);
CREATE INDEX IF NOT EXISTS runs_by_workflow ON runs (workflow, created_at DESC, run_id DESC)
"""
"""What a log gains without a new version (an older SDK still opens and writes it, leaving
``code`` empty): each run's manifest hash in its summary, so that a listing reads no log, and
the indexes a filtered listing pages through and the live runs are found by."""


def open_log(
    db: sqlite3.Connection, path: Path, synchronous: str, busy_timeout: int, checkpointing: bool
) -> None:
    """Check the file is a durable log (or new) and set it up, waiting for other openers.

    A lock is a wait, never damage.

    Raises:
        LogCorruptedError: The file is not a durable log; nothing was written.
        LogFormatError: A newer SDK wrote it.
        LogUnavailableError: Another process kept it locked past ``busy_timeout``, or the disk
            is full or refused the file (the log is not damaged then).
    """
    deadline = time.monotonic() + busy_timeout / 1000
    pause = 0.002
    while True:
        try:
            _setup(db, path, synchronous, busy_timeout, checkpointing)
            return
        except sqlite3.OperationalError as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            # Switching a fresh file to WAL needs a lock that SQLite does not wait
            # for: another process opening the same new file at once holds it.
            if not busy(exc):
                raise _failed_open(path, exc) from exc
            if time.monotonic() >= deadline:
                raise stayed_locked(path, busy_timeout, exc) from exc
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise _failed_open(path, exc) from exc
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


def _failed_open(path: Path, exc: Exception) -> LogCorruptedError | LogUnavailableError:
    """The error for a failed open: the disk or the file system refused it, or the file is damaged."""
    return refused(path, exc) or _unreadable(path, exc)


def _unreadable(path: Path, exc: Exception) -> LogCorruptedError:
    return LogCorruptedError(
        f"{str(path)!r} is not a readable durable log ({exc}). Nothing was written "
        "to it. Move it aside to start a new log, or restore it from a backup."
    )


def _recognise(db: sqlite3.Connection, path: Path, version: int, tables: set[str]) -> None:
    """Refuse, before anything is written, a file whose tables are not the log's own."""
    if not tables and version == 0:
        return  # a new, empty file: the log is created in it
    missing = []
    for table, columns in _COLUMNS.items():
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if not columns <= have:
            missing.append(table)
    if 1 <= version <= SCHEMA_VERSION and not missing:
        return
    shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    raise LogCorruptedError(
        f"{str(path)!r} is another database, not a durable log: it holds the tables "
        f"{shown} (user_version {version}) and not the log's own. Nothing was written to it. "
        "Give local_world() a data directory of its own (the log is events.db inside it), "
        "or move this file out of the data directory if it was put there by mistake."
    )


def _setup(
    db: sqlite3.Connection, path: Path, synchronous: str, busy_timeout: int, checkpointing: bool
) -> None:
    db.execute(f"PRAGMA busy_timeout={int(busy_timeout)}")
    db.execute("BEGIN")  # one read snapshot: another opener may be creating the log right now
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = {
        r[0]
        for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        if not r[0].startswith("sqlite_")
    }
    if version > SCHEMA_VERSION and (not tables or set(_COLUMNS) <= tables):
        raise LogFormatError(
            f"{str(path)!r} has log schema version {version}, written by a newer "
            f"durable; this one reads version {SCHEMA_VERSION}. Upgrade little-workflow."
        )
    _recognise(db, path, version, tables)
    db.execute("COMMIT")
    if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
        raise sqlite3.DatabaseError("WAL journal mode is not available for this file")
    db.execute(f"PRAGMA synchronous={synchronous}")
    if checkpointing:
        db.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
    if version < SCHEMA_VERSION:
        db.execute("BEGIN IMMEDIATE")
        # Read again under the write lock: another opener may have upgraded the file meanwhile.
        if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            have = {r[1] for r in db.execute("PRAGMA table_info(events)")}
            if "written_at" not in have:  # a version 1 log: its older rows keep no time
                db.execute("ALTER TABLE events ADD COLUMN written_at REAL")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    if not _has_code(db):
        db.execute("BEGIN IMMEDIATE")
        if not _has_code(db):  # another opener may have added it meanwhile
            for stmt in _ADDED.split(";"):
                if stmt.strip():
                    db.execute(stmt)
        db.execute("COMMIT")


def _has_code(db: sqlite3.Connection) -> bool:
    return "code" in {r[1] for r in db.execute("PRAGMA table_info(runs)")}
