"""Logs written by a newer, incompatible SDK are refused with the version that wrote them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import durable
from durable import LogFormatError
from durable.cli import main
from durable.events import LOG_FORMAT_VERSION
from durable.store import Append
from tests.conftest import Worlds


@durable.workflow
async def hello(name: str) -> str:
    return f"hello {name}"


def test_every_run_records_the_log_format_version(world: durable.World) -> None:
    """``run.started`` carries the format version this SDK writes."""
    asyncio.run(durable.run_workflow(hello, "ada", world=world, run_id="r"))
    started = world.events("r")[0]
    assert started.type == "run.started"
    assert started.format_version == LOG_FORMAT_VERSION


def test_run_from_a_newer_log_format_is_refused_with_its_version(worlds: Worlds) -> None:
    """A run whose ``run.started`` names a newer format fails, naming both versions, and writes nothing."""
    world = worlds.open()
    asyncio.run(durable.run_workflow(hello, "ada", world=world, run_id="r"))
    rows = world.log.read("r")
    newer = json.loads(rows[0][2]) | {"format_version": LOG_FORMAT_VERSION + 1}
    token = world.log.fence("r2")
    world.log.append(
        [Append("r2", [(1, "run.started", json.dumps(newer))], token, "running", ("hello", None))]
    )
    with pytest.raises(LogFormatError) as info:
        asyncio.run(durable.run_workflow(hello, "ada", world=worlds.open(), run_id="r2"))
    assert f"log format {LOG_FORMAT_VERSION + 1}" in str(info.value)
    assert f"reads format {LOG_FORMAT_VERSION}" in str(info.value)
    assert len(world.log.read("r2")) == 1


def _newer_schema(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    durable.local_world(data).close()
    with sqlite3.connect(data / "events.db") as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    return data


def test_database_from_a_newer_schema_is_refused_with_its_version(tmp_path: Path) -> None:
    """An ``events.db`` whose schema version is newer fails to open, naming that version."""
    data = _newer_schema(tmp_path)
    with pytest.raises(LogFormatError, match="schema version 99"):
        durable.local_world(data)


def test_cli_names_the_newer_schema_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``little verify`` on a newer database prints one line naming the version and exits 1."""
    data = _newer_schema(tmp_path)
    assert main(["verify", "r", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err
    assert "schema version 99" in err
    assert err.count("\n") == 1


def test_a_format_1_log_replays_with_its_hashes_and_unfolded_steps(worlds: Worlds) -> None:
    """A log written by format 1 (``step.started`` apart, hashes over the ``json`` module's text) resumes.

    The input ``1e-07`` is where the two hash formats differ, so the recorded
    hash only matches through the format-1 fallback; a changed input still fails.
    """
    from durable.engine._values import dumps, short_hash, value_hash
    from durable.errors import NondeterminismError
    from tests.helpers.crash import SimulatedCrash, on

    calls: list[float] = []

    @durable.step
    async def scale(x: float) -> float:
        calls.append(x)
        return x * 2

    @durable.step
    async def tail() -> int:
        return 0

    arg = {"x": 1e-07}

    @durable.workflow(name="wf")
    async def wf() -> float:
        out = await scale(arg["x"])
        await tail()
        return out

    crashing = worlds.crashing(on("step.completed", "tail"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, world=crashing, run_id="new"))
    world = worlds.open()
    legacy = short_hash(dumps({"x": 1e-07}))
    assert legacy != value_hash({"x": 1e-07})
    rows = []
    for _, type_, text in world.log.read("new"):
        data = json.loads(text)
        if type_ == "run.started":
            rows.append((type_, data | {"format_version": 1}))
        elif type_ == "step.completed":  # unfold, as format 1 wrote it
            start = {k: data.pop(k) for k in ("attempt", "input_hash", "pos")}
            rows.append(("step.started", {"path": data["path"], "visit": 0, **start, "input_hash": legacy}))
            rows.append((type_, data))
    for run_id in ("old", "old_changed"):
        token = world.log.fence(run_id)
        batch = [(i + 1, t, json.dumps(d)) for i, (t, d) in enumerate(rows)]
        world.log.append([Append(run_id, batch, token, "running", ("wf", None))])

    assert asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="old")) == 2e-07
    assert calls == [1e-07]  # replayed, not run again
    arg["x"] = 2e-07
    with pytest.raises(NondeterminismError, match="scale"):
        asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="old_changed"))
    assert calls == [1e-07]
