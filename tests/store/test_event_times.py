"""Row times in a SQLite log written before they were kept (schema version 1)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from durable.store import Append, SqliteLog
from durable.store.log._sqlite_schema import SCHEMA_VERSION

_V1 = """
CREATE TABLE events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL DEFAULT '', status TEXT NOT NULL DEFAULT 'running',
    parent_run_id TEXT, created_at REAL NOT NULL DEFAULT 0, updated_at REAL NOT NULL DEFAULT 0,
    token INTEGER NOT NULL DEFAULT 0
);
INSERT INTO runs (run_id, workflow, token) VALUES ('r', 'wf', 1);
INSERT INTO events VALUES ('r', 1, 'run.started', '{}');
PRAGMA user_version=1;
"""


def test_a_version_1_log_gains_row_times_and_keeps_its_rows(tmp_path: Path) -> None:
    """Opening a version-1 file adds the column; old rows have no time, new rows have theirs."""
    path = tmp_path / "events.db"
    raw = sqlite3.connect(path)
    raw.executescript(_V1)
    raw.close()
    log = SqliteLog(path)
    try:
        assert log.read("r") == [(1, "run.started", "{}")]
        assert log.times("r") == {}
        before = time.time()
        log.append([Append("r", [(2, "step.completed", "{}")], 1)])
        got = log.times("r")
        assert list(got) == [2] and got[2] >= before
    finally:
        log.close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    raw.close()
    again = SqliteLog(path)  # an upgraded file opens as it is
    try:
        assert [r[0] for r in again.read("r")] == [1, 2]
    finally:
        again.close()
