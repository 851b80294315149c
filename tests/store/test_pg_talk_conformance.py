"""The Postgres message, outbox and schedule stores pass the public conformance rules (a schema per test)."""

from __future__ import annotations

from pathlib import Path

from durable.store import EventLog, MessageStore, OutboxStore, ScheduleStore
from durable.store.conformance_talk import (
    MessageStoreConformance,
    OutboxStoreConformance,
    ScheduleStoreConformance,
)
from tests.helpers.pg import OnPostgres


class TestPostgresMessages(OnPostgres, MessageStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, MessageStore]:
        log = self.open_log()
        return log, log.message_store()


class TestPostgresOutbox(OnPostgres, OutboxStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, OutboxStore]:
        log = self.open_log()
        return log, log.outbox_store()


class TestPostgresSchedules(OnPostgres, ScheduleStoreConformance):
    def open_store(self, where: Path) -> ScheduleStore:
        from durable.store.schedules._postgres import PostgresSchedules

        return PostgresSchedules(self.open_log().db)
