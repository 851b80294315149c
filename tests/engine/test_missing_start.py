"""A run's log that does not begin with its start is damage, found before anything runs."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter

import pytest

import durable
from durable.errors import LogCorruptedError
from durable.ops._verify import verify_run
from tests.conftest import Worlds

CALLS: Counter[str] = Counter()


@durable.step
async def fetch(i: int) -> int:
    CALLS["fetch"] += 1
    return i + 1


@durable.tool
async def charge(amount: int) -> str:
    CALLS["charge"] += 1
    return f"charged {amount}"


@durable.workflow
async def pay(i: int) -> str:
    return await charge(await fetch(i))


def _delete_row(worlds: Worlds, run_id: str, seq: int) -> None:
    """Remove one row from the stored log, as a hand edit or a damaged file would."""
    if worlds.kind == "memory":
        log = worlds._memory_log
        assert log is not None
        log._rows[run_id] = [r for r in log._rows[run_id] if r[0] != seq]
    elif worlds.kind == "postgres":
        import psycopg  # the postgres extra, there whenever a postgres world is

        assert worlds.dsn is not None
        with psycopg.connect(worlds.dsn, autocommit=True) as db:
            db.execute(f"DELETE FROM {worlds.schema}.events WHERE run_id = %s AND seq = %s", (run_id, seq))
    else:
        with sqlite3.connect(worlds.data_dir / "events.db") as db:
            db.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", (run_id, seq))
        db.close()


def test_a_completed_run_without_its_start_is_corruption_and_nothing_runs(worlds: Worlds) -> None:
    """With seq 1 (run.started) deleted, a rerun raises LogCorruptedError and runs no step or tool again."""
    CALLS.clear()
    assert asyncio.run(durable.run_workflow(pay, 1, world=worlds.open(), run_id="r")) == "charged 2"
    _delete_row(worlds, "r", 1)
    world = worlds.open()
    before = [e.seq for e in world.events("r")]
    with pytest.raises(LogCorruptedError, match=r"run 'r'.*run\.started") as err:
        asyncio.run(durable.run_workflow(pay, 1, world=world, run_id="r"))
    assert err.value.run_id == "r" and "little verify r" in str(err.value)
    assert dict(CALLS) == {"fetch": 1, "charge": 1}  # nothing ran a second time
    assert [e.seq for e in world.events("r")] == before  # and nothing was appended


def test_verify_names_a_log_without_its_start(worlds: Worlds) -> None:
    """``little verify`` reports the missing start itself, besides the seq gap it leaves."""
    assert asyncio.run(durable.run_workflow(pay, 1, world=worlds.open(), run_id="v")) == "charged 2"
    _delete_row(worlds, "v", 1)
    report = verify_run(worlds.open(), "v")
    assert not report["ok"]
    assert any("begins with event 2" in p and "run.started" in p for p in report["problems"])


def test_a_compacted_run_begins_with_its_snapshot_and_still_resumes(worlds: Worlds) -> None:
    """A log that compaction cut down to a snapshot replays from it: the result, and no call again."""
    CALLS.clear()
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(pay, 1, world=world, run_id="c")) == "charged 2"
    durable.compact("c", world=world)
    assert [e.type for e in world.events("c")] == ["snapshot"]
    assert asyncio.run(durable.run_workflow(pay, 1, world=worlds.open(), run_id="c")) == "charged 2"
    assert dict(CALLS) == {"fetch": 1, "charge": 1}
