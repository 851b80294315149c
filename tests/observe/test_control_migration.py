"""A control store written before tracing is migrated in place, its records kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durable.store.control._protocol import ControlRecord
from durable.store.control._sqlite import SCHEMA_VERSION, SqliteControl

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
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    raw.close()


_V2 = _V1.replace(
    "seq INTEGER NOT NULL DEFAULT 0\n", "seq INTEGER NOT NULL DEFAULT 0, traceparent TEXT\n"
).replace(
    "PRAGMA user_version=1;", "UPDATE control SET state = 'claimed', owner = 'w1';\nPRAGMA user_version=2;"
)


def test_a_version_2_store_gains_the_recovery_columns_and_its_claims_count_from_zero(tmp_path: Path) -> None:
    """Opening a version-2 runtime.db adds drives, driven_at and blocked; an old claim has no drives yet."""
    path = tmp_path / "runtime.db"
    raw = sqlite3.connect(path)
    raw.executescript(_V2)
    raw.close()
    ctl = SqliteControl(path)
    try:
        old = ctl.get("old")
        assert old is not None and (old.state, old.drives, old.driven_at, old.blocked) == (
            "claimed",
            0,
            None,
            None,
        )
        again = ctl.adopt("old", "wf", owner="w2", pid=2, host="h", now=5.0)
        assert (again.drives, again.driven_at) == (1, 5.0)
        ctl.block("old", '{"reason": "recovery_exhausted"}')
        assert [r.run_id for r in ctl.blocked_records()] == ["old"]
    finally:
        ctl.close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()
