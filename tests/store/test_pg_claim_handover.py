"""A queued run's claim takes its lease and fencing token in its statement; fencing and leases hold."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import durable
from durable import FencedError
from durable.events import RUN_STARTED, STEP_COMPLETED
from durable.store import Append, ControlRecord, QueueLimits
from tests.helpers import pg


@pytest.fixture
def two(pg_server: pg.Server) -> Iterator[tuple[durable.PostgresWorld, durable.PostgresWorld]]:
    """Two worlds on one schema, each with a pool of its own (as two worker processes)."""
    schema = pg.new_schema()
    a = durable.postgres_world(pg_server.dsn, schema=schema, lease=5.0)
    b = durable.postgres_world(pg_server.dsn, schema=schema, lease=5.0)
    yield a, b
    a.close()
    b.close()
    pg.drop_schema(pg_server.dsn, schema)


def _claim(world: durable.PostgresWorld, run_id: str) -> list[ControlRecord]:
    ctl = world.control_store
    assert ctl is not None
    ctl.submit(ControlRecord(run_id, "wf", queue="q", created_at=time.time()))
    return ctl.claim(QueueLimits("q"), owner="a", pid=1, host="h", room=4, now=time.time())


def _lease_holder(world: durable.PostgresWorld, name: str) -> str | None:
    with world.db.pool.connection() as conn:
        row = conn.execute(world.db.sql("SELECT holder FROM {s}.leases WHERE name = %s"), (name,)).fetchone()
    return None if row is None else str(row[0])


def test_a_claim_fences_out_an_older_writer_and_hands_its_token_over_once(two: tuple) -> None:
    """After a claim a writer with an older token is refused; the claimer's fence gets the claim's token."""
    a, b = two
    old = b.log.fence("r1")
    assert [r.run_id for r in _claim(a, "r1")] == ["r1"]
    with pytest.raises(FencedError):
        b.log.append([Append("r1", [(1, STEP_COMPLETED, "{}")], old)])
    handle = a.locks.try_acquire("run:r1")
    assert handle is not None
    token = a.log.fence("r1")
    assert token == old + 1
    a.log.append([Append("r1", [(1, STEP_COMPLETED, "{}")], token)])
    assert a.log.fence("r1") == token + 1  # handed over once: the next fence takes a new one


def test_a_claimed_runs_lease_is_held_until_its_end_deletes_it(two: tuple) -> None:
    """Another process cannot take a claimed run's lease; the run's end frees it for anyone at once."""
    a, b = two
    _claim(a, "r1")
    handle = a.locks.try_acquire("run:r1")
    assert handle is not None
    assert b.locks.try_acquire("run:r1") is None
    ctl = a.control_store
    assert ctl is not None
    ctl.finish_many([("r1", "done")])
    assert _lease_holder(a, "run:r1") is None
    assert ctl.get("r1").state == "done"  # type: ignore[union-attr]
    other = b.locks.try_acquire("run:r1")
    assert other is not None
    a.locks.release(handle)  # the end deleted its row already: the new holder keeps its lease
    assert _lease_holder(a, "run:r1") == other[1]  # type: ignore[index]


def test_a_claim_over_a_live_lease_takes_neither_lease_nor_token(two: tuple) -> None:
    """A run whose lease another driver holds is claimed, but that driver's token stays current."""
    a, b = two
    held = b.locks.try_acquire("run:r1")
    assert held is not None
    token = b.log.fence("r1")
    assert [r.run_id for r in _claim(a, "r1")] == ["r1"]
    assert a.locks.try_acquire("run:r1") is None
    b.log.append([Append("r1", [(1, STEP_COMPLETED, "{}")], token)])  # not fenced out
    assert a.log.fence("r1") == token + 1  # no token was handed over: a real fence


def test_a_status_read_returns_what_the_summary_and_the_record_say_in_one_query(two: tuple) -> None:
    """``read_with_info`` gives what ``log.info`` and ``get`` do, for unknown, enqueued and started runs."""
    a, _ = two
    ctl = a.control_store
    assert ctl is not None
    assert ctl.read_with_info("nobody") == (None, None)
    ctl.submit(ControlRecord("r1", "wf", queue="q", created_at=time.time()))
    assert ctl.read_with_info("r1") == (None, ctl.get("r1"))
    token = a.log.fence("r1")
    a.log.append([Append("r1", [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
    info, rec = ctl.read_with_info("r1")
    assert info == a.log.info("r1")
    assert info is not None and info.workflow == "wf"
    assert rec == ctl.get("r1")


def _age_grant(world: durable.PostgresWorld, name: str) -> None:
    """Make the lease a claim handed over look a minute old (past the heartbeat's reach)."""
    book = world.db.handover
    with book.mutex:
        holder, _ = book._leases[name]
        book._leases[name] = (holder, time.monotonic() - 60.0)


def test_an_old_handed_over_lease_is_renewed_when_still_ours_and_refused_when_taken(two: tuple) -> None:
    """An old grant is renewed by a query while the row names it; a row taken meanwhile is not ours."""
    a, b = two
    _claim(a, "r1")
    _age_grant(a, "run:r1")
    handle = a.locks.try_acquire("run:r1")
    assert handle is not None
    assert _lease_holder(a, "run:r1") == handle[1]  # type: ignore[index]
    a.locks.release(handle)
    ctl = a.control_store
    assert ctl is not None
    ctl.reopen("r1", None)
    ctl.claim(QueueLimits("q"), owner="a", pid=1, host="h", room=4, now=time.time())
    _age_grant(a, "run:r1")
    with a.db.pool.connection() as conn:  # the claim's lease ran out and another worker took it
        conn.execute(a.db.sql("DELETE FROM {s}.leases WHERE name = 'run:r1'"))
    other = b.locks.try_acquire("run:r1")
    assert other is not None
    assert a.locks.try_acquire("run:r1") is None
    assert _lease_holder(a, "run:r1") == other[1]  # type: ignore[index]


def _counting_queries(world: durable.PostgresWorld) -> list[int]:
    """Count the database round trips ``world`` makes from now on (``Database.run`` calls)."""
    calls = [0]
    real = world.db.run

    def counted(op, *, run_id=None):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(op, run_id=run_id)

    world.db.run = counted  # type: ignore[method-assign]
    return calls


def test_a_claimed_new_runs_log_reads_as_empty_without_a_query_once(two: tuple) -> None:
    """The claim saw no event: the driver's fence and first read send nothing; the next read asks."""
    a, _ = two
    _claim(a, "r1")
    calls = _counting_queries(a)
    token = a.log.fence("r1")
    assert a.log.read("r1") == []
    assert calls[0] == 0
    assert list(a.log.iter_rows("r1")) == []
    assert calls[0] == 1  # the mark is used once
    a.log.append([Append("r1", [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
    assert a.log.read("r1") == [(1, RUN_STARTED, "{}")]


def test_a_claimed_run_with_events_is_read_as_it_is(two: tuple) -> None:
    """A resumed run (events in its log) is read after the claim's fence, as always."""
    a, b = two
    old = b.log.fence("r2")
    b.log.append([Append("r2", [(1, RUN_STARTED, "{}")], old, created=("wf", None))])
    _claim(a, "r2")
    token = a.log.fence("r2")
    assert token == old + 1
    assert a.log.read("r2") == [(1, RUN_STARTED, "{}")]


def test_a_new_run_whose_log_gained_events_after_the_claim_is_not_started_over(two: tuple) -> None:
    """Events committed after the claim's look (a writer that came between): the first append is refused."""
    a, _ = two
    _claim(a, "r3")
    token = a.log.fence("r3")
    with a.db.pool.connection() as conn:  # what an older driver's commit in flight would leave
        conn.execute(
            a.db.sql("INSERT INTO {s}.events (run_id, seq, type, data) VALUES (%s, 1, %s, '{}')"),
            ("r3", STEP_COMPLETED),
        )
    assert a.log.read("r3") == []  # what the claim saw
    with pytest.raises(FencedError, match="another writer started the run"):
        a.log.append([Append("r3", [(1, RUN_STARTED, '{"x": 1}')], token, created=("wf", None))])
    (refused,) = a.log.append_each(
        [Append("r3", [(1, RUN_STARTED, '{"x": 1}')], token, created=("wf", None))]
    )
    assert isinstance(refused, FencedError)
    assert "another writer started the run" in str(refused)
    assert a.log.read("r3") == [(1, STEP_COMPLETED, "{}")]
    assert a.log.info("r3") is None  # nothing of the refused creation was written


def test_a_claims_empty_mark_is_not_used_once_it_is_old(two: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark older than its window (a fence with no read after it) is dropped: the read asks the database."""
    from durable.store.log import _fresh

    a, b = two
    _claim(a, "r4")
    a.log.fence("r4")
    theirs = b.log.fence("r4")  # another process took the run and started it meanwhile
    b.log.append([Append("r4", [(1, RUN_STARTED, "{}")], theirs, created=("wf", None))])
    monkeypatch.setattr(_fresh, "EMPTY_FOR", 0.0)
    assert a.log.read("r4") == [(1, RUN_STARTED, "{}")]
