"""A Postgres log across lost connections: retried on a fresh one, a commit never lost nor written twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable import FencedError, LogUnavailableError
from durable.store import Append, PostgresLog
from durable.store.conformance import rows
from durable.store.postgres._schema import Database, connect
from tests.helpers import pg


@pytest.fixture
def db(pg_server: pg.Server) -> Iterator[Database]:
    schema = pg.new_schema()
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(pg_server.dsn, application_name=schema)  # so the test can find the pool's connections
    opened = connect(dsn, schema=schema, min_size=2, max_size=2, reconnect_timeout=10, connect_timeout=10)
    yield opened
    opened.close()
    pg.drop_schema(pg_server.dsn, schema)


def terminate_pool_connections(dsn: str, db: Database) -> int:
    """Have the server end every connection of the pool (as a restart or a failover does)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        cur = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (db.schema,),
        )
        return len(cur.fetchall())


def test_appends_go_on_after_the_server_cut_every_connection(db: Database, pg_server: pg.Server) -> None:
    """After the server ends the pool's connections, the next append is retried and lands once."""
    log = PostgresLog(db)
    token = log.fence("r1")
    log.append([Append("r1", rows(1, 2), token, created=("wf", None))])
    assert terminate_pool_connections(pg_server.dsn, db) >= 1
    log.append([Append("r1", rows(3, 1), token)])
    log.append([Append("r1", rows(4, 1), token, status="completed")])
    assert log.read("r1") == rows(1, 4)
    info = log.info("r1")
    assert info is not None
    assert info.status == "completed"


def test_a_retry_of_a_commit_that_landed_reports_success(db: Database) -> None:
    """A retried append whose rows are already stored as given succeeds without writing them again."""
    log = PostgresLog(db)
    token = log.fence("r1")
    log.append([Append("r1", rows(1, 2), token, created=("wf", None))])
    with db.pool.connection() as conn:  # what a retry after a lost reply does
        log._append_rows(conn, 1, Append("r1", rows(2, 1), token))
        log._append_batch(conn, 1, [Append("r1", rows(1, 2), token)])
    assert log.read("r1") == rows(1, 2)


def test_a_retried_batch_with_a_rowless_append_that_landed_reports_success(db: Database) -> None:
    """A parent's rows with a child's summary only: once the rows are stored, the retry is a success."""
    log = PostgresLog(db)
    p, c = log.fence("p"), log.fence("c")
    batch = [Append("p", rows(1, 1), p, created=("outer", None)), Append("c", [], c, created=("inner", "p"))]
    log.append(batch)
    with db.pool.connection() as conn:
        log._append_batch(conn, 1, batch)
    assert log.read("p") == rows(1, 1)
    info = log.info("c")
    assert info is not None
    assert info.parent_run_id == "p"


def test_a_retry_that_finds_other_rows_at_its_seqs_is_fenced(db: Database) -> None:
    """Rows of another writer at the retried seqs are not ours: the retry raises FencedError."""
    log = PostgresLog(db)
    token = log.fence("r1")
    log.append([Append("r1", rows(1, 2), token, created=("wf", None))])
    with db.pool.connection() as conn, pytest.raises(FencedError):
        log._append_rows(conn, 1, Append("r1", [(2, "step.completed", '{"other": 1}')], token))
    assert log.read("r1") == rows(1, 2)


def test_a_closed_world_says_so_at_once(db: Database) -> None:
    """Using the log after its pool was closed raises LogUnavailableError instead of retrying."""
    log = PostgresLog(db)
    db.close()
    with pytest.raises(LogUnavailableError, match="closed"):
        log.read("r1")
