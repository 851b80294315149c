"""DBOS with a SQLite system database: ``@DBOS.workflow`` and ``@DBOS.step``.

``journal="wal"`` sets the file to WAL before DBOS opens it (the mode
persists in the file); ``journal="default"`` lets DBOS create the file
as it does by default (rollback journal). DBOS keeps SQLite's default
``synchronous`` setting, which fsyncs every commit.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from typing import Any

from dbos import DBOS, SetWorkflowID

RUN_ID = "bench_run"
_kill_at: int | None = None


@DBOS.step()
def trivial(i: int) -> int:
    return i


@DBOS.workflow()
def sequential(n: int) -> int:
    for i in range(n):
        if i == _kill_at:
            os._exit(0)
        trivial(i)
    if n == _kill_at:
        os._exit(0)
    return n


def _launch(dir: str, journal: str, executor: str = "bench") -> str:
    path = os.path.join(dir, "dbos.sqlite")
    if journal == "wal" and not os.path.exists(path):
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode=WAL")
        db.close()
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{path}",
            "executor_id": executor,
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    return path


def _db_bytes(path: str) -> int:
    db = sqlite3.connect(path)
    if db.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return os.path.getsize(path)


def seq(dir: str, n: int, durability: str, tool: bool = False, journal: str = "wal") -> dict[str, Any]:
    path = _launch(dir, journal)
    with SetWorkflowID("warm"):
        sequential(3)
    empty = _db_bytes(path)
    t0 = time.perf_counter()
    with SetWorkflowID(RUN_ID):
        sequential(n)
    seconds = time.perf_counter() - t0
    DBOS.destroy()
    return {
        "seconds": seconds,
        "per_us": seconds / max(n, 1) * 1e6,
        "bytes_per_step": (_db_bytes(path) - empty) / n,
    }


def build(
    dir: str, n: int, kill_at: int | None = None, others: int = 0, journal: str = "wal"
) -> dict[str, Any]:
    global _kill_at
    # Another executor id than resume's, so that launching the resuming
    # process does not recover the run in the background by itself.
    _launch(dir, journal, executor="bench-build")
    _kill_at = kill_at
    with SetWorkflowID(RUN_ID):
        sequential(n)
    DBOS.destroy()
    return {}


def resume(dir: str, n: int, journal: str = "wal") -> dict[str, Any]:
    _launch(dir, journal, executor="bench-resume")
    t0 = time.perf_counter()
    # DBOS's own recovery path after a crash: find the pending workflows of the
    # dead executor and run them again; finished steps return their outputs.
    handles = DBOS._recover_pending_workflows(["bench-build"])
    if handles:
        out = handles[0].get_result(polling_interval_sec=0.001)  # no polling delay
    else:  # the run had finished: calling it again returns the recorded output
        with SetWorkflowID(RUN_ID):
            out = sequential(n)
    seconds = time.perf_counter() - t0
    assert out == n
    DBOS.destroy()
    return {"seconds": seconds, "per_us": seconds / max(n, 1) * 1e6}
