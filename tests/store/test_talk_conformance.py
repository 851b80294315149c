"""The message, outbox and schedule stores that ship pass the conformance rules."""

from __future__ import annotations

from pathlib import Path

from durable.store import (
    EventLog,
    MemoryLog,
    MemoryMessages,
    MemoryOutbox,
    MemorySchedules,
    MessageStore,
    OutboxStore,
    ScheduleStore,
    SqliteLog,
    SqliteMessages,
    SqliteOutbox,
    SqliteSchedules,
)
from durable.store.conformance_talk import (
    MessageStoreConformance,
    OutboxStoreConformance,
    ScheduleStoreConformance,
)


class TestMemoryMessages(MessageStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, MessageStore]:
        log = MemoryLog()
        return log, MemoryMessages(log)


class TestSqliteMessages(MessageStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, MessageStore]:
        log = SqliteLog(where / "events.db")
        return log, SqliteMessages(log)


class TestMemoryOutbox(OutboxStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, OutboxStore]:
        log = MemoryLog()
        return log, MemoryOutbox(log)


class TestSqliteOutbox(OutboxStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, OutboxStore]:
        log = SqliteLog(where / "events.db")
        return log, SqliteOutbox(log)


class TestMemorySchedules(ScheduleStoreConformance):
    def open_store(self, where: Path) -> ScheduleStore:
        return MemorySchedules()


class TestSqliteSchedules(ScheduleStoreConformance):
    def open_store(self, where: Path) -> ScheduleStore:
        return SqliteSchedules(where / "runtime.db")
