"""Postgres message and outbox stores: a commit whose confirmation was lost is found, not redone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from durable.store import Append, OutboxEntry
from tests.helpers.pg import Server, drop_schema, new_schema


@pytest.fixture
def log(pg_server: Server) -> Iterator[Any]:
    from durable.store.log._postgres import PostgresLog
    from durable.store.postgres._schema import connect

    schema = new_schema()
    db = connect(
        pg_server.dsn, schema=schema, min_size=1, max_size=2, reconnect_timeout=5, connect_timeout=10
    )
    yield PostgresLog(db)
    db.close()
    drop_schema(pg_server.dsn, schema)


def _replay_after_commit(db: Any) -> None:
    """Make ``db.run`` run each operation twice: the second as the retry of a lost, committed first."""
    real = db.run

    def run(op: Any, *, run_id: str | None = None) -> Any:
        real(lambda conn, attempt: op(conn, 0), run_id=run_id)
        return real(lambda conn, attempt: op(conn, 1), run_id=run_id)

    db.run = run


def test_a_retried_consume_returns_the_message_its_lost_attempt_consumed(log: Any) -> None:
    """The retry finds its row and its message; the next message stays for the next recv."""
    store = log.message_store()
    token = log.fence("r")
    log.append([Append("r", [(1, "run.started", "{}")], token, created=("wf", None))])
    store.send("r", None, '"a"', "m1", 1.0)
    store.send("r", None, '"b"', "m2", 2.0)

    def build(msg: Any) -> tuple[int, str, str]:
        return (2, "message.received", f'{{"value":{msg.data}}}')

    _replay_after_commit(log.db)
    got = store.consume("r", None, token, build)
    assert got is not None
    assert (got.data, got.consumed_seq) == ('"a"', 2)
    assert [m.data for m in store.messages("r", pending=True)] == ['"b"']
    assert log.read("r", 1) == [(2, "message.received", '{"value":"a"}')]


def test_a_retried_enqueue_stores_its_rows_and_entry_once(log: Any) -> None:
    """The retry of a committed enqueue finds its rows and writes nothing more (no taken-seq error)."""
    store = log.outbox_store()
    token = log.fence("r")
    log.append([Append("r", [(1, "run.started", "{}")], token, created=("wf", None))])
    _replay_after_commit(log.db)
    entry = OutboxEntry("k", "r", "email", "{}", created_at=1.0, next_at=1.0, updated_at=1.0)
    store.enqueue(Append("r", [(2, "effect.intent", "{}")], token), entry)
    assert [s for s, _, _ in log.read("r")] == [1, 2]
    assert [e.key for e in store.entries()] == ["k"]
