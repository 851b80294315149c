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

    def test_a_group_with_two_appends_of_one_run_writes_both_in_order(self, log: EventLog) -> None:
        """Not what the engine gives, but a group may hold one run twice: each append lands, in order."""
        each = log.append_each  # type: ignore[attr-defined]  # every built-in log has it
        a, b = log.fence("a"), log.fence("b")
        got = each(
            [
                Append("a", [(1, RUN_STARTED, "{}")], a, created=("wf", None)),
                Append("b", [(1, RUN_STARTED, "{}")], b, created=("wf", None)),
                Append("a", [(2, RUN_COMPLETED, "{}")], a, status="completed"),
            ]
        )
        assert got == [None, None, None]
        assert log.read("a") == [(1, RUN_STARTED, "{}"), (2, RUN_COMPLETED, "{}")]
        info = log.info("a")
        assert info is not None and info.status == "completed"

    def test_groups_of_shared_runs_from_many_threads_lock_them_in_one_order(self, log: EventLog) -> None:
        """Groups of the same runs in opposite orders, at once: no deadlock, and every row of both lands."""
        import threading

        import psycopg

        def deadlocks() -> int:  # the server's own count, for this database
            with psycopg.connect(self.dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_stat_clear_snapshot()")
                row = admin.execute(
                    "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
                ).fetchone()
                return int(row[0]) if row else 0

        each = log.append_each  # type: ignore[attr-defined]  # every built-in log has it
        before = deadlocks()
        names = [f"r{i}" for i in range(8)]
        tokens = {r: log.fence(r) for r in names}
        log.append([Append(r, [(1, RUN_STARTED, "{}")], t, created=("wf", None)) for r, t in tokens.items()])
        outcomes: list[list[BaseException | None]] = []
        errors: list[BaseException] = []

        def push(order: list[str], seq: int) -> None:
            try:
                for k in range(20):
                    batch = [Append(r, [(seq + 2 * k, STEP_COMPLETED, "{}")], tokens[r]) for r in order]
                    outcomes.append(each(batch))
            except BaseException as exc:  # reaches the assertion below
                errors.append(exc)

        threads = [
            threading.Thread(target=push, args=(names, 2)),
            threading.Thread(target=push, args=(names[::-1], 3)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(outcomes) == 40
        assert deadlocks() == before  # a deadlock is retried, so only the server's count can tell
        for r in names:  # every step of both writers landed: they interleave, and nothing was lost
            assert [seq for seq, _, _ in log.read(r)] == list(range(1, 42))
