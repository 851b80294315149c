"""A queued run's claim takes its lease and fencing token in its statement; fencing and leases hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

import durable
from durable import FencedError
from durable.events import RUN_STARTED, STEP_COMPLETED
from durable.store import Append, ControlRecord, QueueLimits
from tests.helpers import pg
from tests.helpers.waiting import until


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


def _started(world: durable.PostgresWorld, run_id: str) -> tuple[object, int]:
    """Claim ``run_id`` as a worker would, take its lease and token, and write its start."""
    _claim(world, run_id)
    handle = world.locks.try_acquire(f"run:{run_id}")
    assert handle is not None
    token = world.log.fence(run_id)
    world.log.append([Append(run_id, [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
    return handle, token


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "grouped"])
@pytest.mark.parametrize(("status", "state"), [("completed", "done"), ("cancelled", "cancelled")])
def test_a_runs_end_ends_its_claimed_record_and_lease_in_its_own_statement(
    two: tuple, grouped: bool, status: str, state: str
) -> None:
    """The log's end of a claimed run ends its record and deletes its lease; the finish then sends nothing."""
    a, b = two
    handle, token = _started(a, "r1")
    end = Append("r1", [(2, STEP_COMPLETED, "{}")], token, status=status)
    if grouped:
        assert a.log.append_each([end]) == [None]
    else:
        a.log.append([end])
    ctl = a.control_store
    assert ctl is not None
    assert ctl.get("r1").state == state  # type: ignore[union-attr]
    assert _lease_holder(a, "run:r1") is None
    calls = _counting_queries(a)
    ctl.finish_many([("r1", state)])
    a.locks.release(handle)
    assert calls[0] == 0  # both were done by the end's statement
    assert b.locks.try_acquire("run:r1") is not None  # and the lease is free for anyone


def test_a_finish_with_another_state_than_the_ends_is_still_sent(two: tuple) -> None:
    """A driver that gives the record another state than the log's end did writes it (one statement)."""
    a, _ = two
    handle, token = _started(a, "r1")
    a.log.append([Append("r1", [(2, STEP_COMPLETED, "{}")], token, status="completed")])
    ctl = a.control_store
    assert ctl is not None
    calls = _counting_queries(a)
    ctl.finish_many([("r1", "cancelled")])
    assert calls[0] == 1
    assert ctl.get("r1").state == "cancelled"  # type: ignore[union-attr]
    a.locks.release(handle)


def test_a_fenced_end_ends_neither_the_record_nor_the_lease(two: tuple) -> None:
    """An end refused for its stale token leaves the record claimed and the lease held, alone or grouped."""
    a, _ = two
    handle, token = _started(a, "r1")
    _, other = _started(a, "r2")
    a.log.fence("r1")  # another driver fenced r1 meanwhile
    stale = Append("r1", [(2, STEP_COMPLETED, "{}")], token, status="completed")
    with pytest.raises(FencedError):
        a.log.append([stale])
    fine = Append("r2", [(2, STEP_COMPLETED, "{}")], other, status="completed")
    refused, written = a.log.append_each([stale, fine])
    assert isinstance(refused, FencedError) and written is None
    ctl = a.control_store
    assert ctl is not None
    assert ctl.get("r1").state == "claimed"  # type: ignore[union-attr]
    assert _lease_holder(a, "run:r1") == handle[1]  # type: ignore[index]
    assert ctl.get("r2").state == "done"  # type: ignore[union-attr]
    assert _lease_holder(a, "run:r2") is None
    calls = _counting_queries(a)
    ctl.finish_many([("r1", "done"), ("r2", "done")])
    assert calls[0] == 1  # r1's record still needs its end
    assert ctl.get("r1").state == "done"  # type: ignore[union-attr]


def test_a_runs_end_leaves_a_record_not_claimed_to_its_finish(two: tuple) -> None:
    """A run driven while its record waits in its queue keeps the record for the runtime to end."""
    a, _ = two
    ctl = a.control_store
    assert ctl is not None
    ctl.submit(ControlRecord("r1", "wf", queue="q", created_at=time.time()))
    token = a.log.fence("r1")
    a.log.append([Append("r1", [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
    a.log.append([Append("r1", [(2, STEP_COMPLETED, "{}")], token, status="completed")])
    assert ctl.get("r1").state == "enqueued"  # type: ignore[union-attr]
    calls = _counting_queries(a)
    ctl.finish_many([("r1", "done")])
    assert calls[0] == 1
    assert ctl.get("r1").state == "done"  # type: ignore[union-attr]


def test_a_runs_end_announces_its_queues_free_slot(two: tuple) -> None:
    """Another process waiting for a slot of the queue hears ``free:<queue>`` at the end's commit."""
    import asyncio

    a, b = two
    _, token = _started(a, "r1")
    listener = b.control_store
    assert listener is not None

    async def main() -> list[str | None]:
        loop = asyncio.get_running_loop()
        rung = asyncio.Event()
        heard: list[str | None] = []

        def on_change() -> None:
            heard.append(listener.notifier.last_heard if listener.notifier else None)
            loop.call_soon_threadsafe(rung.set)

        stop = listener.subscribe(on_change, ("free:q",))
        assert stop is not None
        heard.clear()  # the first LISTEN counts as a change
        await asyncio.to_thread(
            a.log.append, [Append("r1", [(2, STEP_COMPLETED, "{}")], token, status="completed")]
        )
        await asyncio.wait_for(rung.wait(), 10.0)
        stop()
        return heard

    assert asyncio.run(main()) == ["free:q"]


def test_each_end_a_worker_drives_gives_the_record_the_drivers_own_state(two: tuple) -> None:
    """Completed, failed, interrupted, cancelled: the log's end gave each record what the driver would.

    So the runtime's finish after each sent nothing: the log's table of end
    states and the driver's agree.
    """
    from durable import Queue, RunCancelledError, RunInterrupted, Worker
    from tests.runtime.test_runtime import asks, breaks_after_a_step, plus_one, sleeper, wait_events

    a, _ = two
    book = a.db.handover
    left: list[tuple[str, str]] = []
    real_unfinished = book.unfinished

    def unfinished(ends: list[tuple[str, str]]) -> list[tuple[str, str]]:
        got = real_unfinished(ends)
        left.extend(got)
        return got

    book.unfinished = unfinished  # type: ignore[method-assign]

    async def drive() -> list[durable.RunHandle]:
        q = Queue("q")
        ok = durable.start_workflow(plus_one, 1, world=a, queue=q)
        bad = durable.start_workflow(breaks_after_a_step, 1, world=a, queue=q)
        ask = durable.start_workflow(asks, 1, world=a, queue=q)
        slow = durable.start_workflow(sleeper, 10_000, world=a, queue=q)
        async with Worker(a, workflows=[plus_one, breaks_after_a_step, asks, sleeper], queues=[q]) as w:
            assert await ok.result(timeout=30) == 2
            with pytest.raises(ValueError, match="no good"):
                await bad.result(timeout=30)
            with pytest.raises(RunInterrupted):
                await ask.result(timeout=30)
            await wait_events(a, slow.run_id, 2)
            await slow.cancel()
            with pytest.raises(RunCancelledError):
                await slow.result(timeout=30)
            await until(lambda: w.in_flight == 0)
        return [ok, bad, ask, slow]

    handles = asyncio.run(drive())
    ctl = a.control_store
    assert ctl is not None
    states = [ctl.get(h.run_id).state for h in handles]  # type: ignore[union-attr]
    assert states == ["done", "done", "done", "cancelled"]
    assert left == []  # no end needed a finish statement of its own
