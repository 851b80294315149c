"""``PostgresLog`` passes the public conformance suite, each test in a schema of its own."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.store import EventLog
from durable.store.conformance import EventLogConformance
from tests.helpers.pg import Server, drop_schema


class TestPostgresLog(EventLogConformance):
    @pytest.fixture
    def where(self, tmp_path: Path, pg_server: Server) -> Iterator[Path]:
        self.dsn = pg_server.dsn
        yield tmp_path
        drop_schema(pg_server.dsn, self._schema(tmp_path))

    def _schema(self, where: Path) -> str:
        return "c_" + hashlib.sha256(str(where).encode()).hexdigest()[:20]

    def open_log(self, where: Path) -> EventLog:
        from durable.store.log._postgres import PostgresLog
        from durable.store.postgres._schema import connect

        db = connect(
            self.dsn,
            schema=self._schema(where),
            min_size=1,
            max_size=2,
            reconnect_timeout=5,
            connect_timeout=10,
        )
        return PostgresLog(db, owns=True)
