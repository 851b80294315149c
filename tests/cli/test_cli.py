"""The `little` CLI against a real data directory."""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

import durable
from durable.cli import main


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    @durable.tool(idempotent=True)
    async def score(c: str) -> int:
        return len(c)

    @durable.step(max_visits=2)
    async def worker(c: str) -> int:
        return await score(c)

    @durable.workflow
    async def wf() -> int:
        return await worker("a") + await worker("bb")

    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(wf, world=world, run_id="r1"))
    return tmp_path


def test_runs_lists_the_run(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little runs --json` lists the run with its status."""
    assert main(["runs", "--data-dir", str(data_dir), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["run_id"], r["status"]) for r in runs] == [("r1", "completed")]


def test_events_prints_every_event(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little events` prints one line per event, with a type filter."""
    assert main(["events", "r1", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "run.started" in out and "worker.visit[1]" in out
    assert main(["events", "r1", "--data-dir", str(data_dir), "--json", "--type", "step.completed"]) == 0
    events = json.loads(capsys.readouterr().out)
    assert [e["path"] for e in events] == ["worker.visit[0]", "worker.visit[1]"]


def test_events_say_when_they_were_written(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each event line starts with its commit time in ISO 8601; ``--json`` has it as Unix and ISO."""
    assert main(["events", "r1", "--data-dir", str(data_dir), "--json"]) == 0
    events = json.loads(capsys.readouterr().out)
    for e in events:
        assert isinstance(e["at"], float)
        parsed = datetime.datetime.fromisoformat(e["at_iso"])
        assert parsed.tzinfo is not None and abs(parsed.timestamp() - e["at"]) < 0.001
    assert main(["events", "r1", "--data-dir", str(data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == [e["at_iso"] for e in events]


def test_replay_rebuilds_state(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little replay --json` shows status, committed steps, visits and confirmed effects."""
    assert main(["replay", "r1", "--data-dir", str(data_dir), "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["status"] == "completed"
    assert state["visits"] == {"worker": 2}
    assert len(state["confirmed_effects"]) == 2 and state["unconfirmed_effects"] == []


def test_unknown_run_is_one_line_and_exit_1(data_dir: Path) -> None:
    """An unknown run id prints one line on stderr and exits 1, with no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "durable.cli", "events", "nope", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "nope" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_data_dir_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with no log is reported in one line."""
    assert main(["runs", "--data-dir", str(tmp_path / "none")]) == 1
    assert "no durable data directory" in capsys.readouterr().err


def test_bad_arguments_exit_1(data_dir: Path) -> None:
    """An unknown command or a bad option exits 1."""
    assert main(["frobnicate"]) == 1
    assert main(["runs", "--data-dir", str(data_dir), "--limit", "0"]) == 1


@pytest.mark.parametrize("command", ["runs", "events", "replay"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`little COMMAND --help` describes the command and exits 0."""
    assert main([command, "--help"]) == 0
    assert "--data-dir" in capsys.readouterr().out
