"""Both shipped log backends pass the public conformance suite a backend author runs."""

from __future__ import annotations

from pathlib import Path

from durable.store import Append, EventLog, MemoryLog, SqliteLog
from durable.store.conformance import EventLogConformance


class TestMemoryLog(EventLogConformance):
    reopens = False

    def open_log(self, where: Path) -> EventLog:
        return MemoryLog()


class TestSqliteLog(EventLogConformance):
    def open_log(self, where: Path) -> EventLog:
        return SqliteLog(where / "events.db")


class TestSqliteLogPowerDurability(EventLogConformance):
    def open_log(self, where: Path) -> EventLog:
        return SqliteLog(where / "events.db", durability="power")


def test_an_unsynced_append_leaves_power_durability_as_it_was(tmp_path: Path) -> None:
    """After a ``sync=False`` append, the connection commits with ``synchronous=FULL`` again."""
    log = SqliteLog(tmp_path / "events.db", durability="power")
    token = log.fence("r1")
    log.append([Append("r1", [(1, "run.started", "{}")], token, created=("wf", None))], sync=False)
    assert log._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    log.close()
