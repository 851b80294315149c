"""Both shipped log backends pass the public conformance suite a backend author runs."""

from __future__ import annotations

from pathlib import Path

from durable.store import EventLog, MemoryLog, SqliteLog
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
