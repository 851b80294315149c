"""``PostgresControl``: queue limits hold across claimers with their own pools; NOTIFY announces changes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from durable.store import ControlRecord, PostgresControl, QueueLimits
from tests.helpers import pg


@pytest.fixture
def controls(pg_server: pg.Server) -> Iterator[list[PostgresControl]]:
    """Four control stores on one schema, each with a pool of its own (as four worker processes)."""
    from durable.store.postgres._schema import connect

    schema = pg.new_schema()
    dbs = [
        connect(pg_server.dsn, schema=schema, min_size=1, max_size=2, reconnect_timeout=5, connect_timeout=10)
        for _ in range(4)
    ]
    stores = [PostgresControl(db, pg_server.dsn) for db in dbs]
    yield stores
    for store, db in zip(stores, dbs, strict=True):
        store.close()
        db.close()
    pg.drop_schema(pg_server.dsn, schema)


def submit(ctl: PostgresControl, n: int, queue: str = "q", **fields: object) -> list[str]:
    ids = [f"r{i:03d}" for i in range(n)]
    for rid in ids:
        ctl.submit(ControlRecord(rid, "wf", queue=queue, created_at=time.time(), **fields))  # type: ignore[arg-type]
    return ids


def claim_all_at_once(stores: list[PostgresControl], limits: QueueLimits, room: int) -> list[ControlRecord]:
    """Every store claims at the same moment from a thread of its own; all their claims together."""
    out: list[ControlRecord] = []
    lock = threading.Lock()
    start = threading.Barrier(len(stores))

    def claim(ctl: PostgresControl, i: int) -> None:
        start.wait()
        got = ctl.claim(limits, owner=f"w{i}", pid=i, host="h", room=room, now=time.time())
        with lock:
            out.extend(got)

    threads = [threading.Thread(target=claim, args=(c, i)) for i, c in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrency_holds_across_claimers(controls: list[PostgresControl]) -> None:
    """Four claimers at once, each with room for ten, take three runs in all under concurrency=3."""
    submit(controls[0], 20)
    got = claim_all_at_once(controls, QueueLimits("q", concurrency=3), room=10)
    assert len(got) == 3
    assert len({r.run_id for r in got}) == 3
    assert len(controls[1].claimed()) == 3


def test_a_run_is_claimed_by_one_claimer_only(controls: list[PostgresControl]) -> None:
    """Without limits, claimers at once split the waiting runs: none is claimed twice."""
    ids = submit(controls[0], 40)
    got = claim_all_at_once(controls, QueueLimits("q"), room=15)
    assert sorted(r.run_id for r in got) == ids


def test_partition_concurrency_holds_across_claimers(controls: list[PostgresControl]) -> None:
    """One run per partition key in flight, whoever claims."""
    for i in range(12):
        controls[0].submit(ControlRecord(f"r{i:02d}", "wf", queue="q", partition_key=f"k{i % 3}"))
    got = claim_all_at_once(controls, QueueLimits("q", partition_concurrency=1), room=10)
    assert sorted(r.partition_key or "" for r in got) == ["k0", "k1", "k2"]


def test_rate_limit_holds_across_claimers(controls: list[PostgresControl]) -> None:
    """``rate_limit=(2, 60)``: two starts in the window in all, even with free slots."""
    submit(controls[0], 10)
    got = claim_all_at_once(controls, QueueLimits("q", rate_limit=(2, 60.0)), room=10)
    assert len(got) == 2


def test_priority_then_fifo(controls: list[PostgresControl]) -> None:
    """Lower priority numbers go first; FIFO within a priority."""
    ctl = controls[0]
    for rid, prio in (("a", 5), ("b", 0), ("c", 5), ("d", 0)):
        ctl.submit(ControlRecord(rid, "wf", queue="q", priority=prio))
    got = ctl.claim(QueueLimits("q"), owner="w", pid=1, host="h", room=4, now=time.time())
    assert [r.run_id for r in got] == ["b", "d", "a", "c"]


def test_dedup_across_submitters_at_once(controls: list[PostgresControl]) -> None:
    """Eight submits of one dedup id at once store one run; every submitter gets its record."""
    results: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def go(i: int) -> None:
        start.wait()
        rec = controls[i % 4].submit(ControlRecord(f"r{i}", "wf", queue="q", dedup_id="order-7"))
        with lock:
            results.append(rec.run_id)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert len(controls[0].unstarted()) == 1


def test_a_row_locked_elsewhere_is_skipped_not_waited_for(
    controls: list[PostgresControl], pg_server: pg.Server
) -> None:
    """A waiting run locked by another transaction is skipped (SKIP LOCKED); the next one is claimed."""
    import psycopg

    ctl = controls[0]
    submit(ctl, 2)
    with psycopg.connect(pg_server.dsn) as other:  # a transaction that holds r000's row
        other.execute(ctl.db.sql("SELECT 1 FROM {s}.control WHERE run_id = 'r000' FOR UPDATE"))
        got = ctl.claim(QueueLimits("q"), owner="w", pid=1, host="h", room=2, now=time.time())
        assert [r.run_id for r in got] == ["r001"]
        other.rollback()


def test_another_stores_write_is_announced(controls: list[PostgresControl]) -> None:
    """A submit through one store wakes the subscribers of another, through NOTIFY (no query)."""
    import asyncio

    listener, writer = controls[0], controls[1]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        rung = asyncio.Event()
        stop = listener.subscribe(lambda: loop.call_soon_threadsafe(rung.set))
        assert stop is not None
        rung.clear()  # the listener's first LISTEN counts as a change
        writer.submit(ControlRecord("r1", "wf", queue="q"))
        await asyncio.wait_for(rung.wait(), 10.0)
        stop()

    asyncio.run(main())


def test_a_subscriber_about_one_run_is_woken_by_that_run_only(controls: list[PostgresControl]) -> None:
    """``subscribe(about=("run:<id>",))`` skips other runs' and queues' announcements (delivered before)."""
    import asyncio

    listener, writer = controls[0], controls[1]
    submit(writer, 2)  # r000 and r001, before anyone listens

    async def main() -> list[str | None]:
        loop = asyncio.get_running_loop()
        rung = asyncio.Event()
        heard: list[str | None] = []

        def on_change() -> None:
            notifier = listener.notifier
            heard.append(notifier.last_heard if notifier else None)
            loop.call_soon_threadsafe(rung.set)

        stop = listener.subscribe(on_change, ("run:r001",))
        assert stop is not None
        heard.clear()  # the listener's first LISTEN counts as a change
        writer.finish_many([("r000", "done")])  # "run:r000" and "free:q": not for this subscriber
        writer.finish_many([("r001", "done")])  # delivered after them, on the same channel
        await asyncio.wait_for(rung.wait(), 10.0)
        stop()
        return heard

    assert asyncio.run(main())[0] == "run:r001"


@pytest.mark.parametrize("dedup", [None, "d1"], ids=["plain submit", "dedup submit"])
def test_a_run_without_a_queue_wakes_no_worker_when_it_is_submitted(
    controls: list[PostgresControl], dedup: str | None
) -> None:
    """Its process drives it and no worker claims it: only a queued submit is news for the workers."""
    import asyncio

    listener, writer = controls[0], controls[1]

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        heard: list[str] = []
        ended = asyncio.Event()

        def on_run() -> None:
            notifier = listener.notifier
            if notifier is not None and notifier.last_heard == "run:here":
                loop.call_soon_threadsafe(ended.set)

        stops = [
            listener.subscribe(
                lambda: heard.append(str(listener.notifier and listener.notifier.last_heard)), ("queue:",)
            ),
            listener.subscribe(on_run, ("run:here",)),
        ]
        await asyncio.sleep(0.2)  # the listener's first LISTEN counts as a change
        heard.clear()
        writer.submit(ControlRecord("here", "wf", state="claimed", owner="me", dedup_id=dedup))
        writer.finish_many([("here", "done")])  # announced after the submit, on the same channel
        await asyncio.wait_for(ended.wait(), 10.0)
        before = list(heard)
        writer.submit(ControlRecord("queued", "wf", queue="q", dedup_id=dedup))
        for _ in range(200):
            if len(heard) > len(before):
                break
            await asyncio.sleep(0.05)
        for stop in stops:
            assert stop is not None
            stop()
        return [*before, "|", *heard[len(before) :]]

    assert asyncio.run(main()) == ["|", "queue:q"]
