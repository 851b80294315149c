"""The control store under load: ends recorded together, writes that wait out another writer, migration."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import Queue, Worker
from durable.runtime._driver import control_of
from durable.store.control._memory import MemoryControl
from durable.store.control._protocol import ControlRecord, WorkerRecord
from durable.store.control._sqlite import SCHEMA_VERSION, SqliteControl
from tests.conftest import Worlds
from tests.runtime.test_runtime import CALLS, GATE, plus_one, until, wait_gate


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    GATE.clear()


async def test_runs_ending_together_share_a_control_transaction_and_end_before_their_lock_frees(
    worlds: Worlds,
) -> None:
    """Runs that end in one turn are ended in one store call; each record ends before its lock is free."""
    world = worlds.open()
    ctl = control_of(world)
    keys = [f"k{i}" for i in range(8)]
    hs = [durable.start_workflow(wait_gate, k, world=world, queue=Queue("q")) for k in keys]
    ids = {h.run_id for h in hs}
    batches: list[list[tuple[str, str]]] = []
    at_release: list[str] = []
    names: dict[int, str] = {}
    real_finish_many, real_acquire, real_release = (
        ctl.finish_many,
        world.locks.try_acquire,
        world.locks.release,
    )

    def finish_many(ends: Any) -> None:
        batches.append(list(ends))
        real_finish_many(ends)

    def try_acquire(name: str) -> object | None:
        got = real_acquire(name)
        if got is not None:
            names[id(got)] = name
        return got

    def release(handle: object) -> None:
        rid = names.get(id(handle), "").removeprefix("run:")
        if rid in ids:
            rec = ctl.get(rid)
            at_release.append(rec.state if rec is not None else "missing")
        real_release(handle)

    ctl.finish_many = finish_many  # type: ignore[method-assign]
    world.locks.try_acquire = try_acquire  # type: ignore[method-assign]
    world.locks.release = release  # type: ignore[method-assign]
    async with Worker(world, workflows=[wait_gate], queues=["q"]) as w:
        await until(lambda: w.in_flight == len(keys) and len(CALLS) == len(keys))
        for k in keys:
            GATE[k].set()
        assert [await h.result() for h in hs] == keys
        await until(lambda: w.in_flight == 0)
    ended = [rid for batch in batches for rid, _ in batch]
    assert sorted(ended) == sorted(ids)
    assert len(batches) < len(keys)  # one transaction per run before
    assert at_release == ["done"] * len(keys)
    assert {ctl.get(r).state for r in ids} == {"done"}  # type: ignore[union-attr]


async def test_a_busy_worker_refills_the_slots_freed_within_a_moment_with_one_claim(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs ending close together while a third still runs: one claim of two, not two of one."""
    from durable.runtime import _worker

    monkeypatch.setattr(_worker, "CLAIM_GATHER", 1.0)  # wide, so that a slow machine still ends k1 inside
    monkeypatch.setattr(_worker, "CLAIM_EVERY", 30.0)  # no periodic claim inside the window
    world = worlds.open()
    ctl = control_of(world)
    keys = [f"k{i}" for i in range(5)]
    hs = [durable.start_workflow(wait_gate, k, world=world, queue=Queue("q")) for k in keys]
    claimed: list[tuple[int, int]] = []
    real_claim = ctl.claim

    def claim(limits: Any, **kw: Any) -> Any:
        got = real_claim(limits, **kw)
        if got:
            claimed.append((kw["room"], len(got)))
        return got

    ctl.claim = claim  # type: ignore[method-assign]
    async with Worker(world, workflows=[wait_gate], queues=["q"], concurrency=3) as w:
        await until(lambda: w.in_flight == 3 and len(CALLS) == 3)
        GATE["k0"].set()
        assert await hs[0].result(timeout=30) == "k0"
        GATE["k1"].set()  # well inside the window the first end opened
        assert await hs[1].result(timeout=30) == "k1"
        assert claimed == [(3, 3)]  # nothing claimed yet: k2 still runs
        await until(lambda: len(CALLS) == 5)
        assert claimed == [(3, 3), (2, 2)]
        for k in keys:
            GATE.setdefault(k, asyncio.Event()).set()
        assert [await h.result(timeout=30) for h in hs] == keys


async def test_a_worker_whose_last_run_ends_claims_at_once(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no other run in flight, a run's end is followed by a claim, even inside another end's window."""
    from durable.runtime import _worker

    monkeypatch.setattr(_worker, "CLAIM_GATHER", 30.0)
    monkeypatch.setattr(_worker, "CLAIM_EVERY", 30.0)
    world = worlds.open()
    hs = [durable.start_workflow(wait_gate, k, world=world, queue=Queue("q")) for k in ("a", "b", "c")]
    async with Worker(world, workflows=[wait_gate], queues=["q"], concurrency=2):
        await until(lambda: sorted(CALLS) == ["gated:a", "gated:b"])
        GATE["a"].set()  # b still runs: a's end opens a 30 s window
        assert await hs[0].result(timeout=30) == "a"
        GATE["b"].set()  # the last run's end: c is claimed long before the window would end
        await until(lambda: "gated:c" in CALLS, timeout=10)
        GATE["c"].set()
        assert [await h.result(timeout=30) for h in hs] == ["a", "b", "c"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_finish_many_ends_only_the_given_runs(kind: str, tmp_path: Path) -> None:
    """``finish_many`` ends the named records, clears their requests and leaves the others alone."""
    ctl = MemoryControl() if kind == "memory" else SqliteControl(tmp_path / "runtime.db")
    for rid in ("a", "b", "c"):
        ctl.submit(ControlRecord(rid, "wf", state="claimed", cancel_reason="requested", resume="failed"))
    ctl.finish_many([("a", "done"), ("b", "cancelled"), ("missing", "done")])
    got = {rid: ctl.get(rid) for rid in ("a", "b", "c")}
    assert {rid: (r.state, r.cancel_reason, r.resume) for rid, r in got.items() if r is not None} == {
        "a": ("done", None, None),
        "b": ("cancelled", None, None),
        "c": ("claimed", "requested", "failed"),
    }
    assert ctl.get("missing") is None
    ctl.close()


def _hold_write_lock(path: Path, released: threading.Event, held: threading.Event) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    held.set()
    released.wait(10)
    db.execute("COMMIT")
    db.close()


def test_a_write_waits_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    """The store's own retry (SQLite's busy handler is off while it begins) waits and then writes."""
    path = tmp_path / "runtime.db"
    ctl = SqliteControl(path)
    released, held = threading.Event(), threading.Event()
    other = threading.Thread(target=_hold_write_lock, args=(path, released, held))
    other.start()
    assert held.wait(10)
    threading.Timer(0.05, released.set).start()
    ctl.submit(ControlRecord("r", "wf"))  # blocks until the other writer commits
    other.join()
    rec = ctl.get("r")
    assert rec is not None and rec.seq == 1
    assert ctl._db.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000  # restored for reads
    ctl.close()


def test_a_write_gives_up_after_busy_timeout(tmp_path: Path) -> None:
    """A writer kept out past ``busy_timeout`` gets SQLite's 'locked' error, and can write later."""
    path = tmp_path / "runtime.db"
    ctl = SqliteControl(path, busy_timeout=30)
    released, held = threading.Event(), threading.Event()
    other = threading.Thread(target=_hold_write_lock, args=(path, released, held))
    other.start()
    assert held.wait(10)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            ctl.submit(ControlRecord("r", "wf"))
    finally:
        released.set()
        other.join()
    ctl.submit(ControlRecord("r", "wf"))  # free again
    assert ctl.get("r") is not None
    ctl.close()


def test_a_version_1_control_file_gets_the_seq_index(tmp_path: Path) -> None:
    """Opening a version-1 ``runtime.db`` adds the ``seq`` index and keeps its records."""
    path = tmp_path / "runtime.db"
    ctl = SqliteControl(path)
    ctl.submit(ControlRecord("old", "wf"))
    ctl._db.execute("DROP INDEX control_seq")
    ctl._db.execute("ALTER TABLE control DROP COLUMN traceparent")  # as version 1 had it
    ctl._db.execute("PRAGMA user_version=1")
    ctl.close()
    ctl = SqliteControl(path)
    assert ctl._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    plan = ctl._db.execute("EXPLAIN QUERY PLAN SELECT COALESCE(MAX(seq), 0) + 1 FROM control").fetchall()
    assert "control_seq" in str(plan)  # a new record no longer scans the table for its seq
    assert ctl.submit(ControlRecord("new", "wf")).seq == 2
    assert ctl.get("old") is not None
    assert "traceparent" in {r[1] for r in ctl._db.execute("PRAGMA table_info(control)")}
    ctl.close()


async def test_cancel_requests_name_the_pending_cancellations_of_the_runs_asked_about(
    world: durable.World,
) -> None:
    """Only claimed runs with a request, of those asked about; an ended run's request is gone."""
    from durable.store.control._protocol import QueueLimits

    ctl = control_of(world)
    for rid in ("a", "b", "c", "d"):
        ctl.submit(ControlRecord(rid, "wf", queue="q", created_at=1.0))
    claimed = ctl.claim(QueueLimits("q"), owner="w1", pid=1, host="h", room=3, now=2.0)
    assert sorted(r.run_id for r in claimed) == ["a", "b", "c"]
    for rid in ("a", "b", "d"):  # d is still enqueued: it is cancelled at once, nobody watches it
        ctl.request_cancel(rid, f"stop {rid}", 3.0)
    assert ctl.cancel_requests(["a", "c", "d", "missing"]) == {"a": "stop a"}
    assert ctl.cancel_requests(["a", "b"]) == {"a": "stop a", "b": "stop b"}
    ctl.finish("a", "cancelled")
    assert ctl.cancel_requests(["a", "b", "c"]) == {"b": "stop b"}
    assert ctl.cancel_requests([]) == {}


def test_a_control_file_without_the_cancellations_index_gets_it(tmp_path: Path) -> None:
    """A store made by an SDK before the index gets it on open; requests written without it are read."""
    path = tmp_path / "runtime.db"
    ctl = SqliteControl(path)
    ctl.submit(ControlRecord("r", "wf", state="claimed"))
    ctl._db.execute("DROP INDEX control_cancels")
    ctl.close()
    old = sqlite3.connect(path)  # a writer that knows no such index
    old.execute("UPDATE control SET cancel_reason = 'requested' WHERE run_id = 'r'")
    old.commit()
    old.close()
    ctl = SqliteControl(path)
    query = "SELECT run_id, cancel_reason FROM control WHERE cancel_reason IS NOT NULL AND state = 'claimed'"
    plan = ctl._db.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()
    # a driver's watch reads the requests, not its every run
    assert "control_cancels" in str(plan) or "(state=? AND cancel_reason>?)" in str(plan)
    assert ctl.cancel_requests(["r", "other"]) == {"r": "requested"}
    assert ctl._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # no new version
    ctl.close()


def test_a_control_file_without_the_workers_table_gets_it_and_keeps_its_version(tmp_path: Path) -> None:
    """A store of an SDK before workers registered themselves gets the table; older SDKs still open it."""
    path = tmp_path / "runtime.db"
    SqliteControl(path).close()
    old = sqlite3.connect(path)
    old.execute("DROP TABLE workers")
    old.commit()
    old.close()
    ctl = SqliteControl(path)
    ctl.register_worker(WorkerRecord("w", 7, "h", 1.0, '{"wf": "sha256:0"}', ("emails", "default")))
    assert ctl.workers() == [WorkerRecord("w", 7, "h", 1.0, '{"wf": "sha256:0"}', ("emails", "default"))]
    assert ctl.workers()[0].workflows == ("wf",)
    assert ctl._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # an older SDK reads it
    ctl.close()


async def test_the_control_store_counts_drives_until_an_outcome_and_keeps_blocked_runs_apart(
    world: durable.World,
) -> None:
    """A claim and an adoption count a drive; finish and reopen start again; a blocked run is no claim.

    A blocked run is unfinished: it keeps its dedup id.
    """
    from durable.store.control._protocol import ControlRecord, QueueLimits

    ctl = control_of(world)
    ctl.submit(ControlRecord("c", "wf", queue="q", dedup_id="once", created_at=1.0))
    (got,) = ctl.claim(QueueLimits("q"), owner="w1", pid=1, host="h", room=1, now=2.0)
    assert (got.drives, got.driven_at) == (1, 2.0)
    assert ctl.get("c") == got
    again = ctl.adopt("c", "wf", owner="w2", pid=2, host="h", now=3.0)
    assert (again.drives, again.driven_at) == (2, 3.0)
    ctl.uncount("c")
    assert ctl.get("c").drives == 1  # type: ignore[union-attr]
    ctl.block("c", '{"reason": "recovery_exhausted"}')
    assert [r.run_id for r in ctl.blocked_records()] == ["c"]
    assert "c" not in {r.run_id for r in ctl.claimed()}
    assert ctl.submit(ControlRecord("c2", "wf", queue="q", dedup_id="once")).run_id == "c"  # unfinished
    ctl.submit(ControlRecord("d", "wf", queue="q", created_at=4.0))
    free = ctl.claim(QueueLimits("q", concurrency=1), owner="w", pid=1, host="h", room=1, now=4.0)
    assert [r.run_id for r in free] == ["d"]  # the blocked run holds no slot of its queue
    ctl.finish("d", "done")
    reopened = ctl.reopen("c", None)
    assert reopened is not None and (reopened.state, reopened.drives, reopened.blocked) == (
        "enqueued",
        0,
        None,
    )
    ctl.claim(QueueLimits("q"), owner="w1", pid=1, host="h", room=1, now=5.0)
    ctl.finish("c", "done")
    done = ctl.get("c")
    assert done is not None and (done.state, done.drives) == ("done", 0)


class _CallsLog:
    """A log that notes, per run, which of its methods the runtime calls, and forwards every call."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._inner, name)
        if name not in ("fence", "iter_rows", "read", "append"):
            return real

        def noted(*args: Any, **kwargs: Any) -> Any:
            first = args[0] if args else None
            run_id = first[0].run_id if name == "append" else first
            self.calls.append((name, str(run_id)))
            return real(*args, **kwargs)

        return noted


async def test_a_worker_fences_and_reads_a_queued_runs_log_once_before_it_drives_it(worlds: Worlds) -> None:
    """The worker's code check and the drive share one fence and one read of the run's log."""
    from tests.conftest import SERVICES

    inner = worlds.open()
    log = _CallsLog(inner.log)
    world = durable.World(
        log,  # type: ignore[arg-type]
        inner.locks,
        data_dir=inner.data_dir,
        artifacts=inner.artifacts,
        codec=inner.codec,
    )
    for name in SERVICES:
        setattr(world, name, getattr(inner, name))
    worlds.opened.append(world)  # closed with the others
    h = durable.start_workflow(plus_one, 1, world=world, queue=Queue("q"))
    async with Worker(world, workflows=[plus_one], queues=[Queue("q")]):
        assert await h.result(timeout=30) == 2
    mine = [name for name, rid in log.calls if rid == h.run_id]
    assert mine[: mine.index("append")] == ["fence", "iter_rows"]


async def test_a_worker_groups_the_commits_of_the_runs_it_claims_together(worlds: Worlds) -> None:
    """Twenty queued runs claimed together: their starts, steps and ends share transactions."""
    world = worlds.open()
    handles = [durable.start_workflow(plus_one, i, world=world, queue=Queue("q")) for i in range(20)]
    async with Worker(world, workflows=[plus_one], queues=[Queue("q")]):
        assert [await h.result(timeout=30) for h in handles] == [i + 1 for i in range(20)]
    commits = world.commits
    assert (commits.drives, commits.coming) == (0, 0)
    if getattr(world.log, "append_each", None) is None:
        assert commits.transactions == 0
    else:  # 60 appends (start, step, end of each run) in a handful of transactions
        assert 0 < commits.transactions < 30
    for h in handles:
        assert [e.type for e in world.events(h.run_id)] == ["run.started", "step.completed", "run.completed"]
