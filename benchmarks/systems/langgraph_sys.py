"""LangGraph's functional API: ``@entrypoint`` and ``@task`` with ``SqliteSaver``.

Runs use ``durability="sync"``: each checkpoint write is made before the next
task starts, the guarantee durable gives. ``SqliteSaver`` sets WAL and keeps
SQLite's default ``synchronous`` setting, which fsyncs every commit.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task

THREAD = {"configurable": {"thread_id": "bench_run"}}
_kill_at: int | None = None


@task
def trivial(i: int) -> int:
    return i


def _workflow(dir: str) -> tuple[Any, str]:
    path = os.path.join(dir, "langgraph.sqlite")
    saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))

    @entrypoint(checkpointer=saver)
    def sequential(n: int) -> int:
        for i in range(n):
            if i == _kill_at:
                os._exit(0)
            trivial(i).result()
        if n == _kill_at:
            os._exit(0)
        return n

    @entrypoint(checkpointer=saver)
    def fan_out(n: int) -> int:
        futures = [trivial(i) for i in range(n)]
        return len([f.result() for f in futures])

    return {"sequential": sequential, "fan_out": fan_out}, path


def _db_bytes(path: str) -> int:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return os.path.getsize(path)


def seq(dir: str, n: int, durability: str, tool: bool = False) -> dict[str, Any]:
    wfs, path = _workflow(dir)
    wfs["sequential"].invoke(3, {"configurable": {"thread_id": "warm"}}, durability="sync")
    empty = _db_bytes(path)
    t0 = time.perf_counter()
    out = wfs["sequential"].invoke(n, THREAD, durability="sync")
    seconds = time.perf_counter() - t0
    assert out == n
    return {
        "seconds": seconds,
        "per_us": seconds / max(n, 1) * 1e6,
        "bytes_per_step": (_db_bytes(path) - empty) / n,
    }


def build(dir: str, n: int, kill_at: int | None = None, others: int = 0) -> dict[str, Any]:
    global _kill_at
    wfs, _ = _workflow(dir)
    _kill_at = kill_at
    wfs["sequential"].invoke(n, THREAD, durability="sync")
    return {}


def resume(dir: str, n: int) -> dict[str, Any]:
    wfs, _ = _workflow(dir)
    t0 = time.perf_counter()
    # After a crash the functional API resumes a thread with ``None`` as input;
    # tasks that finished return their saved results.
    out = wfs["sequential"].invoke(None, THREAD, durability="sync")
    seconds = time.perf_counter() - t0
    assert out == n, out
    return {"seconds": seconds, "per_us": seconds / max(n, 1) * 1e6}


def fanout(dir: str, n: int, durability: str) -> dict[str, Any]:
    wfs, _ = _workflow(dir)
    wfs["fan_out"].invoke(3, {"configurable": {"thread_id": "warm"}}, durability="sync")
    t0 = time.perf_counter()
    out = wfs["fan_out"].invoke(n, THREAD, durability="sync")
    seconds = time.perf_counter() - t0
    assert out == n
    return {"seconds": seconds, "per_us": seconds / max(n, 1) * 1e6}
