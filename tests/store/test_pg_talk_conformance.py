"""The Postgres message, outbox and schedule stores pass the public conformance rules (a schema per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable.store import EventLog, MessageStore, OutboxStore, ScheduleStore
from durable.store.conformance_talk import (
    MessageStoreConformance,
    OutboxStoreConformance,
    ScheduleStoreConformance,
)
from tests.helpers.pg import Server, drop_schema, new_schema


class _OnPostgres:
    """Opens a migrated schema per test and drops it afterwards."""

    @pytest.fixture(autouse=True)
    def _schema(self, pg_server: Server) -> Iterator[None]:
        self.dsn = pg_server.dsn
        self.schema = new_schema()
        self.dbs: list[Any] = []
        yield
        for db in self.dbs:
            db.close()
        drop_schema(pg_server.dsn, self.schema)

    def open_log(self) -> Any:
        from durable.store.log._postgres import PostgresLog
        from durable.store.postgres._schema import connect

        db = connect(
            self.dsn, schema=self.schema, min_size=1, max_size=2, reconnect_timeout=5, connect_timeout=10
        )
        self.dbs.append(db)
        return PostgresLog(db)


class TestPostgresMessages(_OnPostgres, MessageStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, MessageStore]:
        log = self.open_log()
        return log, log.message_store()


class TestPostgresOutbox(_OnPostgres, OutboxStoreConformance):
    def open_pair(self, where: Path) -> tuple[EventLog, OutboxStore]:
        log = self.open_log()
        return log, log.outbox_store()


class TestPostgresSchedules(_OnPostgres, ScheduleStoreConformance):
    def open_store(self, where: Path) -> ScheduleStore:
        from durable.store.schedules._postgres import PostgresSchedules

        return PostgresSchedules(self.open_log().db)
