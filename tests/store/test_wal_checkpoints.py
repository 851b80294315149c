"""WAL checkpoints run in a background thread, and never change what the log holds."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from durable import SqliteLog
from durable.store import Append
from durable.store.log._wal_checkpoints import EVERY, SAFETY_NET_PAGES


def _wait_for(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_log_that_is_only_read_starts_no_thread(tmp_path: Path) -> None:
    """Opening, fencing and reading a log starts no checkpoint thread."""
    log = SqliteLog(tmp_path / "events.db")
    log.fence("r")
    assert log.read("r") == []
    assert log.checkpointer is not None
    assert log.checkpointer._thread is None
    log.close()


def test_power_durability_leaves_checkpoints_to_sqlite(tmp_path: Path) -> None:
    """With ``"power"`` every commit waits on the disk anyway: SQLite checkpoints inline, as by default."""
    log = SqliteLog(tmp_path / "events.db", durability="power")
    assert log.checkpointer is None
    assert log._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    token = log.fence("r")
    log.append([Append("r", [(1, "step.completed", "{}")], token)])
    assert [r[0] for r in log.read("r")] == [1]
    log.close()


def test_appends_are_checkpointed_in_the_background(tmp_path: Path) -> None:
    """After EVERY appends the thread copies the WAL into the database file; rows are unchanged."""
    path = tmp_path / "events.db"
    log = SqliteLog(path)
    assert log.checkpointer is not None
    assert log._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == SAFETY_NET_PAGES
    token = log.fence("r")
    size_before = path.stat().st_size
    for seq in range(1, EVERY + 1):
        log.append([Append("r", [(seq, "step.completed", f'{{"x":{seq}}}')], token)])
    assert _wait_for(lambda: log.checkpointer.checkpoints >= 1)
    assert path.stat().st_size > size_before  # the pages reached the database file
    assert [r[0] for r in log.read("r")] == list(range(1, EVERY + 1))
    thread = log.checkpointer._thread
    log.close()
    assert thread is not None and not thread.is_alive()
    with sqlite3.connect(path) as db:  # another reader sees every row after close
        assert db.execute("SELECT COUNT(*) FROM events WHERE run_id = 'r'").fetchone()[0] == EVERY
    db.close()


def test_close_stops_the_thread_and_later_requests_are_ignored(tmp_path: Path) -> None:
    """``close`` joins the thread; a request after it starts nothing."""
    log = SqliteLog(tmp_path / "events.db")
    assert log.checkpointer is not None
    log.checkpointer.request()
    assert _wait_for(lambda: log.checkpointer.checkpoints >= 1)
    thread = log.checkpointer._thread
    log.close()
    log.checkpointer.request()
    assert thread is not None and not thread.is_alive()
    assert log.checkpointer._thread is thread
