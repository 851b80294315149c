"""The Postgres schema is created and recorded by the library; another application's is refused untouched."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

import durable
from durable import ConfigurationError, LogCorruptedError, LogFormatError, LogUnavailableError
from durable.store import Append
from tests.helpers.pg import Server, drop_schema, new_schema


@pytest.fixture
def schema(pg_server: Server) -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(pg_server.dsn, name)


def _sql(dsn: str, *statements: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        out: list[tuple[object, ...]] = []
        for stmt in statements:
            cur = conn.execute(stmt)  # type: ignore[call-overload]
            if cur.description is not None:
                out = [tuple(r) for r in cur.fetchall()]
        return out


def test_a_new_schema_is_created_with_its_version_and_migrations(pg_server: Server, schema: str) -> None:
    """Opening a world creates the schema and records the app, the version and each named migration."""
    from durable.store.postgres._schema import APP, MIGRATIONS, SCHEMA_VERSION

    durable.postgres_world(pg_server.dsn, schema=schema).close()
    assert _sql(pg_server.dsn, f'SELECT app, version FROM "{schema}".durable_meta') == [(APP, SCHEMA_VERSION)]
    names = _sql(pg_server.dsn, f'SELECT name FROM "{schema}".migrations ORDER BY name')
    assert names == [(m[0],) for m in MIGRATIONS]
    durable.postgres_world(pg_server.dsn, schema=schema).close()  # a second open migrates nothing
    assert len(_sql(pg_server.dsn, f'SELECT name FROM "{schema}".migrations')) == len(MIGRATIONS)


def test_a_schema_of_another_application_is_refused_and_left_alone(pg_server: Server, schema: str) -> None:
    """A schema with foreign tables raises LogCorruptedError naming them; nothing is created in it."""
    _sql(pg_server.dsn, f'CREATE SCHEMA "{schema}"', f'CREATE TABLE "{schema}".orders (id int)')
    with pytest.raises(LogCorruptedError, match="another application") as err:
        durable.postgres_world(pg_server.dsn, schema=schema)
    assert "orders" in str(err.value)
    tables = _sql(
        pg_server.dsn, f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}'"
    )
    assert tables == [("orders",)]


def test_a_foreign_table_added_to_a_durable_schema_is_refused(pg_server: Server, schema: str) -> None:
    """A durable schema that gained a table durable did not create is refused before any write."""
    durable.postgres_world(pg_server.dsn, schema=schema).close()
    _sql(pg_server.dsn, f'CREATE TABLE "{schema}".invoices (id int)')
    with pytest.raises(LogCorruptedError, match="invoices"):
        durable.postgres_world(pg_server.dsn, schema=schema)


def test_a_schema_migrated_by_a_newer_sdk_is_refused(pg_server: Server, schema: str) -> None:
    """A schema version above this SDK's raises LogFormatError saying to upgrade."""
    durable.postgres_world(pg_server.dsn, schema=schema).close()
    _sql(pg_server.dsn, f'UPDATE "{schema}".durable_meta SET version = 999')
    with pytest.raises(LogFormatError, match="Upgrade little-workflow"):
        durable.postgres_world(pg_server.dsn, schema=schema)


def test_two_worlds_opening_a_new_schema_at_once_both_work(pg_server: Server, schema: str) -> None:
    """Concurrent first opens migrate once (an advisory lock serialises them)."""
    import threading

    errors: list[BaseException] = []

    def open_close() -> None:
        try:
            durable.postgres_world(pg_server.dsn, schema=schema).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_an_unreachable_server_is_a_typed_error() -> None:
    """A DSN nobody listens on raises LogUnavailableError with advice, within connect_timeout."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(LogUnavailableError, match="pg_isready"):
        durable.postgres_world(f"postgresql://nobody@127.0.0.1:{port}/x", connect_timeout=0.5)


def test_options_are_checked_before_connecting() -> None:
    """A bad schema name, lease or heartbeat is a ConfigurationError, without a server."""
    with pytest.raises(ConfigurationError, match="schema"):
        durable.postgres_world("postgresql://127.0.0.1:1/x", schema="a-b;drop")
    with pytest.raises(ConfigurationError, match="lease"):
        durable.postgres_world("postgresql://127.0.0.1:1/x", lease=0)
    with pytest.raises(ConfigurationError, match="heartbeat"):
        durable.postgres_world("postgresql://127.0.0.1:1/x", lease=1, heartbeat=2)


def test_durable_imports_without_psycopg() -> None:
    """``import durable`` works when psycopg is not installed; postgres_world then names the extra."""
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import durable\n"
        "try:\n"
        "    durable.postgres_world('postgresql://127.0.0.1:1/x')\n"
        "except durable.ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "little-workflow[postgres]" in out.stdout


def test_a_schema_of_an_older_version_is_migrated_forward_keeping_its_rows(
    pg_server: Server, schema: str
) -> None:
    """A version-2 schema (before the talk tables and event times) gains them; its rows stay.

    The row written before the upgrade has no time; a row written after it has one.
    """
    from durable.store.postgres import _schema as _pg_schema

    durable.postgres_world(pg_server.dsn, schema=schema).close()
    _sql(
        pg_server.dsn,
        f'DROP TABLE "{schema}".messages, "{schema}".outbox, "{schema}".schedules',
        f'ALTER TABLE "{schema}".events DROP COLUMN written_at',
        f'ALTER TABLE "{schema}".control DROP COLUMN drives, DROP COLUMN driven_at, DROP COLUMN blocked, '
        "DROP COLUMN budget, DROP COLUMN debounce_key, DROP COLUMN start_at, DROP COLUMN debounce_until",
        f'DROP INDEX "{schema}".runs_by_parent',
        f"DELETE FROM \"{schema}\".migrations WHERE name IN ('0003_talk', '0004_event_times', "
        "'0005_control_drives', '0006_control_budget_debounce', '0007_runs_by_parent')",
        f'UPDATE "{schema}".durable_meta SET version = 2',
        f"INSERT INTO \"{schema}\".events (run_id, seq, type, data) VALUES ('r', 1, 'run.started', '{{}}')",
    )
    with durable.postgres_world(pg_server.dsn, schema=schema) as world:
        assert _sql(pg_server.dsn, f'SELECT version FROM "{schema}".durable_meta') == [
            (_pg_schema.SCHEMA_VERSION,)
        ]
        assert _sql(pg_server.dsn, f'SELECT count(*) FROM "{schema}".messages') == [(0,)]
        assert _sql(pg_server.dsn, f'SELECT run_id, seq FROM "{schema}".events') == [("r", 1)]
        assert world.log.times("r") == {}
        world.log.append([Append("r", [(2, "step.completed", "{}")], 0)])
        assert list(world.log.times("r")) == [2]


def test_a_transaction_left_open_past_the_lease_is_ended_by_the_server(
    pg_server: Server, schema: str
) -> None:
    """A worker paused inside a transaction does not hold its locks past its lease."""
    import time

    import psycopg

    world = durable.postgres_world(pg_server.dsn, schema=schema, lease=1.0)
    with world, world.db.pool.connection() as paused:
        paused.execute("BEGIN")
        paused.execute("SELECT pg_advisory_xact_lock(4242)")
        with psycopg.connect(pg_server.dsn, autocommit=True) as other:
            held = other.execute("SELECT pg_try_advisory_lock(4242)").fetchone()
            assert held == (False,)  # the paused transaction holds it
            time.sleep(2.0)  # past the lease, the paused process does nothing
            freed = other.execute("SELECT pg_try_advisory_lock(4242)").fetchone()
            assert freed == (True,)  # the server ended the stale transaction
        with contextlib.suppress(psycopg.Error):
            paused.execute("ROLLBACK")


def test_a_version_5_schema_with_seven_migrations_gains_the_eighth(pg_server: Server, schema: str) -> None:
    """A schema the previous release left (version 5, migrations 0001-0007) gets 0008: keyed-only indexes."""
    from durable.store.postgres._schema import MIGRATIONS, SCHEMA_VERSION

    durable.postgres_world(pg_server.dsn, schema=schema).close()
    _sql(
        pg_server.dsn,
        f'DROP INDEX "{schema}".control_dedup',
        f'CREATE INDEX control_dedup ON "{schema}".control (queue, dedup_id) '
        "WHERE state IN ('enqueued', 'claimed', 'blocked')",
        f"DELETE FROM \"{schema}\".migrations WHERE name = '0008_keyed_dedup_debounce_indexes'",
        f'UPDATE "{schema}".durable_meta SET version = 5',
    )
    with durable.postgres_world(pg_server.dsn, schema=schema) as world:
        h = world.log
        assert h.integrity_check() == "ok"
    assert _sql(pg_server.dsn, f'SELECT version FROM "{schema}".durable_meta') == [(SCHEMA_VERSION,)]
    assert len(_sql(pg_server.dsn, f'SELECT name FROM "{schema}".migrations')) == len(MIGRATIONS)
    found = _sql(pg_server.dsn, f"SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = '{schema}'")
    indexes = {str(name): str(text) for name, text in found}
    assert "dedup_id IS NOT NULL" in indexes["control_dedup"]
    assert "debounce_key IS NOT NULL" in indexes["control_debounce"]


@pytest.mark.parametrize("stale_after", [None, 2.5])
def test_every_session_of_the_pool_keeps_one_plan_per_statement(
    pg_server: Server, schema: str, stale_after: float | None
) -> None:
    """Each pooled session plans once (``force_generic_plan``) and, with a lease, ends stale transactions."""
    from durable.store.postgres._schema import connect

    db = connect(
        pg_server.dsn,
        schema=schema,
        min_size=2,
        max_size=2,
        reconnect_timeout=5,
        connect_timeout=10,
        stale_after=stale_after,
    )
    try:
        with db.pool.connection() as a, db.pool.connection() as b:  # both sessions of the pool
            for conn in (a, b):
                assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
                timeout = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
                assert timeout == (("0",) if stale_after is None else ("2500ms",))
    finally:
        db.close()
