"""The physical floor: single-row commits with plain ``sqlite3``.

The table has the shape of the durable log (``(run_id, seq)`` primary key,
``WITHOUT ROWID``), the file is in WAL mode, and each row is its own
transaction: one autocommitted ``INSERT``, the cheapest way ``sqlite3`` can
make one row durable.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

_SYNC = {"process": "NORMAL", "power": "FULL"}
_ROW = '{"path":"s.visit[0]","visit":0,"output":0,"output_hash":"0123456789abcdef0123456789abcdef"}'


def _open(dir: str, durability: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(dir, "floor.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={_SYNC[durability]}")
    db.execute(
        "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "type TEXT NOT NULL, data TEXT NOT NULL, written_at REAL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    return db


def seq(dir: str, n: int, durability: str, tool: bool = False) -> dict[str, Any]:
    db = _open(dir, durability)
    run_id = "run_" + "0" * 32
    for i in range(10):  # warm the statement cache and the file
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)", ("warm", i, "step.completed", _ROW, time.time())
        )
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)", (run_id, i, "step.completed", _ROW, time.time())
        )
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    db.close()
    return {"seconds": seconds, "per_us": seconds / n * 1e6, "cpu_us": cpu / n * 1e6}
