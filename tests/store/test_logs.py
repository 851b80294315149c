"""The log backends: SQLite file rules, fencing, seq conflicts and damaged files."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

import durable
from durable import ConfigurationError, FencedError, LogCorruptedError, LogFormatError, MemoryLog, SqliteLog
from durable.store import Append, EventLog


def make(kind: str, tmp_path: Path) -> EventLog:
    return MemoryLog() if kind == "memory" else SqliteLog(tmp_path / "events.db")


@pytest.fixture(params=["memory", "sqlite"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> EventLog:
    return make(request.param, tmp_path)


def test_append_and_read_in_seq_order(log: EventLog) -> None:
    """Rows come back in seq order, filtered by after_seq."""
    token = log.fence("r")
    log.append(
        [Append("r", [(1, "run.started", "{}"), (2, "step.started", "{}")], token, created=("wf", None))]
    )
    log.append([Append("r", [(3, "run.completed", "{}")], token, status="completed")])
    assert [r[0] for r in log.read("r")] == [1, 2, 3]
    assert [r[0] for r in log.read("r", after_seq=2)] == [3]
    assert log.info("r").status == "completed"  # type: ignore[union-attr]


def test_stale_fencing_token_is_refused(log: EventLog) -> None:
    """Once a newer driver fenced the run, the older driver's appends fail and write nothing."""
    old = log.fence("r")
    log.append([Append("r", [(1, "run.started", "{}")], old, created=("wf", None))])
    log.fence("r")
    with pytest.raises(FencedError, match="stale"):
        log.append([Append("r", [(2, "step.started", "{}")], old)])
    assert len(log.read("r")) == 1


def test_second_writer_of_a_seq_fails_instead_of_forking(log: EventLog) -> None:
    """Appending a seq that is already taken fails, and the batch is not written."""
    token = log.fence("r")
    log.append([Append("r", [(1, "run.started", "{}")], token, created=("wf", None))])
    with pytest.raises(FencedError, match="seq 1"):
        log.append([Append("r", [(1, "run.started", "{}")], token)])
    assert len(log.read("r")) == 1


def test_sqlite_file_is_wal_with_schema_version(tmp_path: Path) -> None:
    """The database uses WAL, records its schema version, and a fresh instance reads everything."""
    log = SqliteLog(tmp_path / "events.db")
    token = log.fence("r")
    log.append([Append("r", [(1, "run.started", "{}")], token, created=("wf", None))])
    log.close()
    raw = sqlite3.connect(tmp_path / "events.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 2
    raw.close()
    again = SqliteLog(tmp_path / "events.db")
    assert again.read("r") == [(1, "run.started", "{}")]


@pytest.mark.parametrize(("durability", "level"), [("process", 1), ("power", 2)])
def test_durability_sets_synchronous(tmp_path: Path, durability: str, level: int) -> None:
    """'process' runs with synchronous=NORMAL (1) and 'power' with FULL (2)."""
    log = SqliteLog(tmp_path / "events.db", durability=durability)
    assert log._db.execute("PRAGMA synchronous").fetchone()[0] == level


def test_power_durability_world_runs_workflows(tmp_path: Path) -> None:
    """A world with durability='power' runs and resumes like the default one."""

    @durable.step
    async def s(x: int) -> int:
        return x + 1

    @durable.workflow
    async def wf(x: int) -> int:
        return await s(x)

    with durable.local_world(tmp_path, durability="power") as world:
        assert asyncio.run(durable.run_workflow(wf, 1, world=world, run_id="r")) == 2
    with durable.local_world(tmp_path, durability="power") as world:
        assert [e.type for e in world.events("r")][-1] == "run.completed"


def test_non_sqlite_events_db_is_refused_and_left_untouched(tmp_path: Path) -> None:
    """A file that is not a database raises LogCorruptedError and keeps its bytes."""
    path = tmp_path / "events.db"
    path.write_bytes(b"this is not a database, it is a note\n" * 100)
    before = path.read_bytes()
    with pytest.raises(LogCorruptedError, match="not a readable durable log"):
        durable.local_world(tmp_path)
    assert path.read_bytes() == before


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    """A SQLite file holding other tables is not taken over as a log."""
    raw = sqlite3.connect(tmp_path / "events.db")
    raw.execute("CREATE TABLE customers (id INTEGER)")
    raw.commit()
    raw.close()
    with pytest.raises(LogCorruptedError):
        durable.local_world(tmp_path)


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    """A log written by a newer SDK fails with a message naming the version."""
    raw = sqlite3.connect(tmp_path / "events.db")
    raw.execute("PRAGMA user_version=99")
    raw.commit()
    raw.close()
    with pytest.raises(LogFormatError, match="99"):
        durable.local_world(tmp_path)


def test_unwritable_data_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A data directory without write permission raises ConfigurationError."""
    if os.geteuid() == 0:  # root may write anywhere a mode allows; /proc/self refuses even root
        with pytest.raises(ConfigurationError, match="not writable"):
            durable.local_world("/proc/self")
        return
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(ConfigurationError, match="not writable"):
            durable.local_world(tmp_path)
    finally:
        tmp_path.chmod(0o700)


def test_data_directory_under_a_file_is_a_clear_error(tmp_path: Path) -> None:
    """A data directory that cannot be created (a file is in the way) raises ConfigurationError."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="cannot create"):
        durable.local_world(tmp_path / "file" / "data")


def test_events_of_unknown_run_raise_run_not_found() -> None:
    """Asking for a run that does not exist raises RunNotFoundError."""
    with pytest.raises(durable.RunNotFoundError, match="nope"):
        durable.memory_world().events("nope")


def test_runs_are_listed_newest_first_and_filtered(tmp_path: Path) -> None:
    """world.runs lists runs newest first, filtered by status and workflow."""

    @durable.workflow
    async def ok() -> int:
        return 1

    @durable.workflow
    async def bad() -> int:
        raise ValueError("x")

    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(ok, world=world, run_id="a"))
        with pytest.raises(ValueError, match="x"):
            asyncio.run(durable.run_workflow(bad, world=world, run_id="b"))
        assert [r.run_id for r in world.runs()] == ["b", "a"]
        assert [r.run_id for r in world.runs(status="failed")] == ["b"]
        assert [r.run_id for r in world.runs(workflow="ok")] == ["a"]
