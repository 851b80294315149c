"""A control store written before tracing is migrated in place, its records kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durable.store._control import ControlRecord
from durable.store._sqlite_control import SCHEMA_VERSION, SqliteControl

_V1 = """
CREATE TABLE control (
    run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, input TEXT NOT NULL DEFAULT 'null',
    models TEXT NOT NULL DEFAULT '{}', queue TEXT, partition_key TEXT,
    priority INTEGER NOT NULL DEFAULT 0, dedup_id TEXT, deadline REAL, state TEXT NOT NULL,
    owner TEXT, pid INTEGER, host TEXT, created_at REAL NOT NULL DEFAULT 0, claimed_at REAL,
    cancel_reason TEXT, resume TEXT, seq INTEGER NOT NULL DEFAULT 0
);
INSERT INTO control (run_id, workflow, state, queue, seq) VALUES ('old', 'wf', 'enqueued', 'q', 1);
PRAGMA user_version=1;
"""


def test_a_version_1_store_gains_the_traceparent_column_and_keeps_its_records(tmp_path: Path) -> None:
    """Opening a version-1 runtime.db adds traceparent; the old record reads back without one."""
    path = tmp_path / "runtime.db"
    raw = sqlite3.connect(path)
    raw.executescript(_V1)
    raw.close()
    ctl = SqliteControl(path)
    try:
        old = ctl.get("old")
        assert old is not None and old.queue == "q" and old.traceparent is None
        tp = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        ctl.submit(ControlRecord("new", "wf", queue="q", traceparent=tp))
        new = ctl.get("new")
        assert new is not None and new.traceparent == tp
    finally:
        ctl.close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    raw.close()
