"""`little runs/replay --watch`, ISO times, a failed run's recorded error, plain output when piped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import durable
from durable.cli import main
from tests.helpers.terminal import on_a_terminal
from tests.ui import app
from tests.ui.harness import ROOT, env, start_driver, wait_for_run

EVIL = "bad run; rm -rf ~"
LITTLE = [sys.executable, "-m", "durable.cli"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"

    async def seed() -> None:
        world = durable.local_world(path)
        try:
            with contextlib.suppress(ValueError):
                await durable.run_workflow(app.failing, 2, world=world, run_id=EVIL)
            await durable.run_workflow(app.ticking, 2, world=world, run_id="slept")
        finally:
            world.close()

    asyncio.run(seed())
    return path


def test_replay_of_a_failed_run_shows_its_error_and_the_command_that_retries_it(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded error (type, message) and a shell-quoted `little resume` line are in the output."""
    assert main(["replay", EVIL, "--data-dir", str(data_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "failed"
    assert out["error"]["type"] == "builtins.ValueError" and "cannot handle 2" in out["error"]["message"]
    assert out["retry_command"] == "little resume 'bad run; rm -rf ~' --workflow MODULE:FUNCTION"


def test_replay_lists_timers_with_iso_times(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each durable sleep's wake time is shown as a Unix time and in ISO 8601 (UTC)."""
    assert main(["replay", "slept", "--data-dir", str(data_dir), "--json"]) == 0
    timers = json.loads(capsys.readouterr().out)["timers"]
    assert len(timers) == 2
    assert all(t["wake_at_iso"].endswith("+00:00") and t["wake_at"] > 0 for t in timers)


def test_human_output_shows_iso_times(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little runs` has a CREATED column in ISO 8601; `little events` prints an event's wake time so."""
    assert main(["runs", "--data-dir", str(data_dir)]) == 0
    runs = capsys.readouterr().out.splitlines()
    assert "CREATED" in runs[0] and "+00:00" in runs[1]
    assert main(["events", "slept", "--data-dir", str(data_dir)]) == 0
    timer = next(line for line in capsys.readouterr().out.splitlines() if "timer.set" in line)
    assert "wake_at=20" in timer and "+00:00" in timer


def test_watch_prints_once_for_a_finished_run_and_stops(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --watch` on a finished run prints its state once and returns."""
    assert (
        main(["replay", "slept", "--data-dir", str(data_dir), "--watch", "--json", "--interval", "0.01"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "completed"


def test_watch_rejects_a_bad_interval(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A zero --interval is one line on stderr and exit status 1."""
    assert main(["runs", "--data-dir", str(data_dir), "--watch", "--interval", "0"]) == 1
    assert "--interval must be above 0" in capsys.readouterr().err


def test_replay_watch_follows_a_run_driven_by_another_process(data_dir: Path) -> None:
    """Watching a running run prints each new state until the run completes."""
    driver = start_driver(data_dir, "ticker", 15)
    try:
        wait_for_run(data_dir, "ticker")
        watch = ["--watch", "--json", "--interval", "0.05", "--timeout", "60"]
        proc = subprocess.run(
            [*LITTLE, "replay", "ticker", "--data-dir", str(data_dir), *watch],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env(),
            timeout=120,
        )
    finally:
        driver.wait(60)
    states = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0
    assert len(states) >= 2
    assert states[0]["status"] == "running" and states[-1]["status"] == "completed"


@pytest.mark.parametrize("command", [["runs"], ["events", "slept"], ["replay", EVIL]])
def test_piped_output_has_no_colour_codes(data_dir: Path, command: list[str]) -> None:
    """Written to a pipe (not a terminal), the output holds no ANSI escape sequences."""
    proc = subprocess.run(
        [sys.executable, "-m", "durable.cli", *command, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env() | {"FORCE_COLOR": "", "TERM": "xterm-256color"},
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout
    assert "\x1b[" not in proc.stdout


def test_a_terminal_gets_a_coloured_table(data_dir: Path) -> None:
    """On a pseudo-terminal `little runs` colours the statuses (escape codes), unlike a pipe."""
    environ = {k: v for k, v in env().items() if k != "NO_COLOR"}
    environ |= {"TERM": "xterm-256color", "COLUMNS": "160"}
    code, _, _, out = on_a_terminal(["runs", "--data-dir", str(data_dir)], environ, ROOT)
    assert code == 0
    assert "\x1b[" in out and "completed" in out and "failed" in out
