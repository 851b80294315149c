"""Logs written by a newer, incompatible SDK are refused with the version that wrote them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import durable
from durable import LogFormatError
from durable._log import Append
from durable.cli import main
from durable.events import LOG_FORMAT_VERSION
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
