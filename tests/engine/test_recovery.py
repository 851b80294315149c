"""Recovery, compaction and retention on both backends."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from datetime import timedelta

import pytest

import durable
from durable import World
from durable.engine._snapshots import decode_state, encode_state
from durable.runtime import cancel_run

calls: Counter[str] = Counter()


@durable.step
async def add_one(x: int) -> int:
    calls["add_one"] += 1
    return x + 1


@durable.step(max_visits=10)
async def double(x: int) -> int:
    calls["double"] += 1
    return x * 2


@durable.tool(idempotent=True)
async def notify(x: int) -> str:
    calls["notify"] += 1
    return f"sent {x}"


@durable.workflow
async def pipeline(x: int) -> str:
    y = await add_one(x)
    for _ in range(3):
        y = await double(y)
    return await notify(y)


def run(world: World, run_id: str, x: int = 1) -> str:
    return asyncio.run(durable.run_workflow(pipeline, x, world=world, run_id=run_id))


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


def test_recover_rebuilds_committed_outputs_by_path(world: World) -> None:
    """Recovery gives each committed step's output under its path, with visit suffixes."""
    run(world, "r1", 1)
    state = durable.recover("r1", world=world)
    assert {p: d["output"] for p, d in state.steps_completed.items()} == {
        "add_one": 2,
        "double.visit[0]": 4,
        "double.visit[1]": 8,
        "double.visit[2]": 16,
    }
    assert state.status() == "completed"
    assert state.state_version == 4
    assert list(state.receipts) == ["tool:notify#4"]


def test_recover_unknown_run_raises_run_not_found(world: World) -> None:
    """Recovering a run the world does not hold raises RunNotFoundError."""
    with pytest.raises(durable.RunNotFoundError, match="little runs"):
        durable.recover("nope", world=world)


def test_compacted_log_recovers_to_the_same_state(world: World) -> None:
    """The state recovered after compact equals the state recovered before it."""
    run(world, "r1")
    before = durable.recover("r1", world=world).to_state()
    durable.compact("r1", world=world)
    assert durable.recover("r1", world=world).to_state() == before


def test_compact_leaves_exactly_one_snapshot_event(world: World) -> None:
    """After compact the log holds one snapshot whose base seq is its own seq."""
    run(world, "r1")
    written = len(world.events("r1"))
    result = durable.compact("r1", world=world)
    events = world.events("r1")
    assert [e.type for e in events] == ["snapshot"]
    assert events[0].seq == result.snapshot_seq == events[0].base_seq == written + 1  # type: ignore[union-attr]
    assert result.removed == written
    assert events[0].state_hash == result.state_hash  # type: ignore[union-attr]


def test_resume_after_compaction_runs_nothing_again(worlds) -> None:
    """A finished run resumed from a compacted log returns its output and calls nothing."""
    world = worlds.open()
    out = run(world, "r1", 3)
    durable.compact("r1", world=world)
    calls.clear()
    assert run(worlds.open(), "r1", 3) == out
    assert sum(calls.values()) == 0


@durable.step
async def first() -> int:
    calls["first"] += 1
    return 1


@durable.step
async def second(x: int) -> int:
    calls["second"] += 1
    if calls["second"] == 1:
        raise RuntimeError("transient")
    return x + 1


@durable.workflow
async def two_steps() -> int:
    return await second(await first())


def test_resume_of_a_compacted_unfinished_run_runs_only_the_rest(world: World) -> None:
    """A failed run compacted and retried replays the committed step and runs the failed one."""
    with pytest.raises(RuntimeError):
        asyncio.run(durable.run_workflow(two_steps, world=world, run_id="r2"))
    durable.compact("r2", world=world)
    out = asyncio.run(durable.run_workflow(two_steps, world=world, run_id="r2", retry_failed=True))
    assert out == 2
    assert calls == Counter({"first": 1, "second": 2})


def test_compacting_twice_keeps_the_state(world: World) -> None:
    """A second compact folds the first snapshot into a new one with the same state."""
    run(world, "r1")
    before = durable.recover("r1", world=world).to_state()
    durable.compact("r1", world=world)
    second_ = durable.compact("r1", world=world)
    assert [e.type for e in world.events("r1")] == ["snapshot"]
    assert second_.removed == 1
    assert durable.recover("r1", world=world).to_state() == before


def test_compact_unknown_run_raises_and_writes_nothing(world: World) -> None:
    """Compacting an unknown run raises RunNotFoundError and leaves no trace in the world."""
    with pytest.raises(durable.RunNotFoundError):
        durable.compact("ghost", world=world)
    assert world.log.read("ghost") == []
    assert world.runs() == []


def test_compact_refuses_a_run_being_driven(world: World) -> None:
    """Compaction fails with reason run_busy while another caller holds the run's lock."""
    run(world, "r1")
    handle = world.locks.try_acquire("run:r1")
    try:
        with pytest.raises(durable.RunFailedError) as info:
            durable.compact("r1", world=world)
    finally:
        world.locks.release(handle)
    assert info.value.reason == "run_busy"
    assert "snapshot" not in [e.type for e in world.events("r1")]


def test_vacuum_shrinks_the_file_after_compaction(tmp_path) -> None:
    """world.vacuum() after compacting a long run makes events.db smaller."""
    world = durable.local_world(tmp_path / "data")
    try:

        @durable.step(max_visits=400)
        async def tick(i: int) -> str:
            return "x" * 200

        @durable.workflow
        async def long() -> int:
            for i in range(400):
                await tick(i)
            return 0

        asyncio.run(durable.run_workflow(long, world=world, run_id="long"))
        world.vacuum()
        db = tmp_path / "data" / "events.db"
        before = db.stat().st_size
        durable.compact("long", world=world)
        world.vacuum()
        assert db.stat().st_size < before
    finally:
        world.close()


def finished_ago(world: World, run_id: str, seconds: float) -> None:
    """Move a run's last status change ``seconds`` into the past, as if it had finished then."""
    info = world.log.info(run_id)
    assert info is not None
    when = info.updated_at - seconds
    if isinstance(world.log, durable.SqliteLog):
        world.log._db.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (when, run_id))
    elif isinstance(world, durable.PostgresWorld):
        with world.db.pool.connection() as conn:
            conn.execute(
                world.db.sql("UPDATE {s}.runs SET updated_at = %s WHERE run_id = %s"), (when, run_id)
            )
    else:
        world.log._info[run_id] = dataclasses.replace(info, updated_at=when)  # type: ignore[attr-defined]


def test_gc_deletes_only_finished_runs_older_than_the_age(worlds) -> None:
    """Retention removes completed, failed and cancelled runs past the age; newer and unfinished ones stay."""
    world = worlds.open()
    run(world, "old-done")
    with pytest.raises(RuntimeError):
        asyncio.run(durable.run_workflow(two_steps, world=world, run_id="old-failed"))

    @durable.workflow
    async def waits() -> int:
        return int(durable.interrupt("ok?"))

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(waits, world=world, run_id="old-waiting"))
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(waits, world=world, run_id="old-cancelled"))
    assert cancel_run(world, "old-cancelled") == "cancelled"
    run(world, "new-done")
    for old in ("old-done", "old-failed", "old-waiting", "old-cancelled"):
        finished_ago(world, old, 7200)
    deleted = durable.gc(world=world, older_than=timedelta(hours=1))
    assert sorted(deleted) == ["old-cancelled", "old-done", "old-failed"]
    assert sorted(i.run_id for i in world.runs()) == ["new-done", "old-waiting"]
    assert world.log.read("old-done") == []


def test_gc_dry_run_deletes_nothing(world: World) -> None:
    """A dry run of retention lists what would go and keeps it."""
    run(world, "r1")
    finished_ago(world, "r1", 120)
    assert durable.gc(world=world, older_than=60, dry_run=True) == ["r1"]
    assert [i.run_id for i in world.runs()] == ["r1"]


def test_gc_rejects_a_negative_age(world: World) -> None:
    """Retention with a negative age raises ConfigurationError."""
    with pytest.raises(durable.ConfigurationError, match="non-negative"):
        durable.gc(world=world, older_than=-1)


def test_snapshot_state_is_packed_and_decodes_to_the_same_state(world: World) -> None:
    """A snapshot stores the state compressed, and decoding it gives the state back exactly."""
    run(world, "r1")
    state = durable.recover("r1", world=world).to_state()
    durable.compact("r1", world=world)
    stored = world.events("r1")[0].state  # type: ignore[union-attr]
    assert stored["encoding"] == "zlib+base64"
    assert decode_state(stored) == state
    assert decode_state(encode_state(state)) == state


def test_a_damaged_snapshot_is_reported_as_corruption() -> None:
    """A snapshot whose data is not valid base64 zlib raises LogCorruptedError naming the run."""
    with pytest.raises(durable.LogCorruptedError, match="'r9'"):
        decode_state({"encoding": "zlib+base64", "data": "not base64!"}, "r9")


def test_a_snapshot_in_an_unknown_encoding_asks_for_an_upgrade() -> None:
    """A snapshot encoded in a way this SDK does not know raises LogFormatError."""
    with pytest.raises(durable.LogFormatError, match="Upgrade"):
        decode_state({"encoding": "zstd", "data": ""}, "r9")
