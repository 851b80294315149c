"""The schema of ``runtime.db`` (the control records and the workers' registry) and its migrations.

The schema version is kept in ``PRAGMA user_version``; indexes and the
workers' table are created outside of it, so an older SDK still opens the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ...errors import LogFormatError

SCHEMA_VERSION = 4
"""1: the control table; 2: ``traceparent`` and an index on ``seq`` (a new record takes ``MAX(seq) + 1``);
3: ``drives``, ``driven_at`` and ``blocked`` (bounded recovery, blocked runs); 4: ``budget``,
``debounce_key``, ``start_at`` and ``debounce_until``."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS control (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    input TEXT NOT NULL DEFAULT 'null',
    models TEXT NOT NULL DEFAULT '{}',
    queue TEXT,
    partition_key TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    dedup_id TEXT,
    deadline REAL,
    state TEXT NOT NULL,
    owner TEXT,
    pid INTEGER,
    host TEXT,
    created_at REAL NOT NULL DEFAULT 0,
    claimed_at REAL,
    cancel_reason TEXT,
    resume TEXT,
    seq INTEGER NOT NULL DEFAULT 0,
    traceparent TEXT,
    drives INTEGER NOT NULL DEFAULT 0,
    driven_at REAL,
    blocked TEXT,
    budget TEXT,
    debounce_key TEXT,
    start_at REAL,
    debounce_until REAL
);
CREATE INDEX IF NOT EXISTS control_waiting ON control (queue, state, priority, seq);
CREATE INDEX IF NOT EXISTS control_dedup ON control (queue, dedup_id, state);
CREATE INDEX IF NOT EXISTS control_claims ON control (queue, claimed_at);
CREATE INDEX IF NOT EXISTS control_seq ON control (seq);
"""


_CANCELS_INDEX = (
    "CREATE INDEX IF NOT EXISTS control_cancels ON control (run_id) "
    "WHERE cancel_reason IS NOT NULL AND state = 'claimed'"
)
"""The pending cancellations: the rows a driver's watch reads, usually none."""

_LIVE_INDEXES = (
    "CREATE INDEX IF NOT EXISTS control_state ON control (state, cancel_reason)",
    "CREATE INDEX IF NOT EXISTS control_unstarted ON control (seq) "
    "WHERE claimed_at IS NULL AND state IN ('enqueued', 'cancelled')",
)
"""What the recovery pass and a listing read by state (claimed, waiting, blocked, never started):
found through these, not by a scan of every finished run's ``done`` row."""

_WORKERS = (
    "CREATE TABLE IF NOT EXISTS workers (name TEXT PRIMARY KEY, pid INTEGER NOT NULL DEFAULT 0, "
    "host TEXT NOT NULL DEFAULT '', started_at REAL NOT NULL DEFAULT 0, code TEXT NOT NULL DEFAULT '{}', "
    "queues TEXT NOT NULL DEFAULT '[]')"
)
"""The workers that registered themselves while they serve (``RunControl.register_worker``)."""


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the file's schema to ``SCHEMA_VERSION`` (inside the opener's transaction).

    Raises:
        LogFormatError: The file was written by a newer SDK.
    """
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise LogFormatError(
            f"{str(path)!r} has control schema version {version}, written by a newer "
            f"durable; this one reads version {SCHEMA_VERSION}. Upgrade little-workflow."
        )
    columns = {r[1] for r in db.execute("PRAGMA table_info(control)")}
    if version == 1 and "traceparent" not in columns:  # a store of an SDK before tracing
        db.execute("ALTER TABLE control ADD COLUMN traceparent TEXT")
    if version in (1, 2) and "drives" not in columns:  # a store of an SDK before bounded recovery
        db.execute("ALTER TABLE control ADD COLUMN drives INTEGER NOT NULL DEFAULT 0")
        db.execute("ALTER TABLE control ADD COLUMN driven_at REAL")
        db.execute("ALTER TABLE control ADD COLUMN blocked TEXT")
    if version in (1, 2, 3) and "budget" not in columns:  # a store of an SDK before budgets
        db.execute("ALTER TABLE control ADD COLUMN budget TEXT")
        db.execute("ALTER TABLE control ADD COLUMN debounce_key TEXT")
        db.execute("ALTER TABLE control ADD COLUMN start_at REAL")
        db.execute("ALTER TABLE control ADD COLUMN debounce_until REAL")
    if version < SCHEMA_VERSION:
        for stmt in _SCHEMA.split(";"):
            if stmt.strip():
                db.execute(stmt)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    # Not part of a schema version: an SDK that does not know the index reads and writes
    # the store as before (SQLite keeps the index up to date for every writer), and one
    # that does not know the workers' table never reads it.
    db.execute(_CANCELS_INDEX)
    for index in _LIVE_INDEXES:
        db.execute(index)
    db.execute(_WORKERS)
