"""``PostgresLog`` passes the public conformance suite, each test in a schema of its own."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.errors import FencedError
from durable.events import RUN_COMPLETED, RUN_STARTED, STEP_COMPLETED
from durable.store import Append, EventLog
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

    def test_a_start_onto_a_taken_seq_writes_no_summary(self, log: EventLog) -> None:
        """A run's first append (one statement with its summary) whose seq is taken writes neither."""
        token = log.fence("r1")
        log.append([Append("r1", [(1, STEP_COMPLETED, "{}")], token)])
        with pytest.raises(FencedError):
            log.append([Append("r1", [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
        assert log.info("r1") is None
        assert log.read("r1") == [(1, STEP_COMPLETED, "{}")]

    def test_an_end_onto_a_taken_seq_keeps_the_status(self, log: EventLog) -> None:
        """A run's last append (rows, status, announcement: one statement) on a taken seq changes nothing."""
        token = log.fence("r1")
        log.append([Append("r1", [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
        with pytest.raises(FencedError):
            log.append([Append("r1", [(1, RUN_COMPLETED, "{}")], token, status="completed")])
        info = log.info("r1")
        assert info is not None and info.status == "running"
        assert log.read("r1") == [(1, RUN_STARTED, "{}")]
