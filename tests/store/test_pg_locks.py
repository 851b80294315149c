"""``PostgresLocks``: one holder per lease, takeover only after expiry, renewals only by the holder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable.store import PostgresLocks
from durable.store.postgres._schema import Database, connect
from tests.helpers import pg


@pytest.fixture
def db(pg_server: pg.Server) -> Iterator[Database]:
    schema = pg.new_schema()
    opened = connect(
        pg_server.dsn, schema=schema, min_size=1, max_size=3, reconnect_timeout=5, connect_timeout=10
    )
    yield opened
    opened.close()
    pg.drop_schema(pg_server.dsn, schema)


def expire(db: Database, name: str) -> None:
    """Move a lease's expiry into the past, as if its holder had stopped renewing long ago."""
    with db.pool.connection() as conn:
        conn.execute(
            db.sql(
                "UPDATE {s}.leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = %s"
            ),
            (name,),
        )


def locks(db: Database) -> PostgresLocks:
    return PostgresLocks(db, lease=30.0, heartbeat=10.0)


def test_a_held_lease_is_refused_to_every_other_caller(db: Database) -> None:
    """While a lease is live, a second acquisition (same process or another) gets None."""
    a, b = locks(db), locks(db)
    got = a.try_acquire("run:r1")
    assert got is not None
    assert a.try_acquire("run:r1") is None
    assert b.try_acquire("run:r1") is None
    assert b.free(["run:r1", "run:r2"]) == {"run:r2"}
    a.release(got)
    assert b.try_acquire("run:r1") is not None
    a.close()
    b.close()


def test_an_expired_lease_is_taken_over_and_its_old_holder_cannot_renew_it(db: Database) -> None:
    """After expiry another caller takes the lease; the old holder's renewal finds it lost."""
    a, b = locks(db), locks(db)
    old = a.try_acquire("run:r1")
    assert old is not None
    expire(db, "run:r1")
    assert b.free(["run:r1"]) == {"run:r1"}
    new = b.try_acquire("run:r1")
    assert new is not None
    a.renew()
    assert "run:r1" in a.lost
    a.release(old)  # releasing a lease taken over leaves the new holder's row alone
    assert a.try_acquire("run:r1") is None
    b.release(new)
    a.close()
    b.close()


def test_renewal_keeps_a_lease_live(db: Database) -> None:
    """A renewal by the holder pushes the expiry forward: nobody can take it over then."""
    a, b = locks(db), locks(db)
    got = a.try_acquire("run:r1")
    assert got is not None
    expire(db, "run:r1")
    a.renew()  # the heartbeat came in time
    assert a.lost == set()
    assert b.try_acquire("run:r1") is None
    assert a.holder("run:r1") is not None
    a.close()
    b.close()


@pytest.mark.slow
def test_the_heartbeat_keeps_a_lease_past_its_length(db: Database) -> None:
    """A lease of 0.6 s renewed every 0.2 s is still held after 2 s; once the heartbeat stops it expires."""
    import time

    a = PostgresLocks(db, lease=0.6, heartbeat=0.2)
    b = locks(db)
    got = a.try_acquire("run:r1")
    assert got is not None
    time.sleep(2.0)  # a real wait: the heartbeat thread is what is under test
    assert b.try_acquire("run:r1") is None
    assert a.lost == set()
    a.close()  # the heartbeat stops, as in a process that died
    time.sleep(1.0)
    assert b.try_acquire("run:r1") is not None
    b.close()
