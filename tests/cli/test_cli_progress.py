"""The progress bar of `little verify/compact/gc` over many runs: on a terminal's stderr, never piped."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import durable
from tests.cli.bulk_app import FINISHED, seed
from tests.helpers.terminal import LITTLE, on_a_terminal
from tests.ui.harness import ROOT, env

SGR = re.compile(r"\x1b\[[0-9;]*m")
"""An escape sequence that sets colour or style."""


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    seed(path)
    return path


def _terminal_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in env().items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return base | {"TERM": "xterm-256color", "COLUMNS": "120"} | extra


def on_a_terminal_stderr(
    argv: list[str], environ: dict[str, str], *, stdout_too: bool = False
) -> tuple[int, str, str]:
    """Run `little` with stderr on a pseudo-terminal and stdout on a pipe (or the terminal too).

    Returns the exit status, what the pipe read, and what the terminal showed.
    """
    code, out, _, shown = on_a_terminal(argv, environ, ROOT, stdout=stdout_too, stderr=True)
    return code, out, shown


def test_compact_all_draws_a_bar_on_a_terminal_stderr(data_dir: Path) -> None:
    """With stderr on a terminal, `compact --all` draws a coloured bar counting runs there; stdout is JSON."""
    n = len(FINISHED) + 1  # and the child run
    code, out, err = on_a_terminal_stderr(
        ["compact", "--all", "--json", "--data-dir", str(data_dir)], _terminal_env()
    )
    assert code == 0
    assert "compacting" in err and f"{n}/{n}" in err and "runs" in err
    assert SGR.search(err)
    assert "\x1b" not in out and len(json.loads(out)["compacted"]) == n


@pytest.mark.parametrize(
    ("argv", "label"),
    [(["verify", "--all"], "verifying"), (["gc", "--older-than", "0s"], "deleting")],
)
def test_verify_all_and_gc_draw_a_bar_on_a_terminal_stderr(
    data_dir: Path, argv: list[str], label: str
) -> None:
    """`verify --all` and `gc` show their bar on a terminal's stderr too, and print their result on stdout."""
    code, out, err = on_a_terminal_stderr([*argv, "--json", "--data-dir", str(data_dir)], _terminal_env())
    assert code == 0
    assert label in err and "━" in err
    assert json.loads(out) and "\x1b" not in out


def test_no_color_keeps_the_bar_without_colour(data_dir: Path) -> None:
    """Under NO_COLOR the bar is still drawn (it redraws in place) but sets no colour or style."""
    code, _, err = on_a_terminal_stderr(
        ["compact", "--all", "--data-dir", str(data_dir)], _terminal_env(NO_COLOR="1")
    )
    assert code == 0
    assert "compacting" in err
    assert SGR.search(err) is None


@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        (["compact", "ok-1"], "run_id: ok-1"),
        (["compact", "--all", "--status", "failed"], "compacted 1 run(s)"),
    ],
)
def test_one_run_draws_no_bar(data_dir: Path, argv: list[str], first_line: str) -> None:
    """Over one run (named, or the only one --all picks) nothing is written on stderr, even on a terminal."""
    code, out, err = on_a_terminal_stderr([*argv, "--data-dir", str(data_dir)], _terminal_env())
    assert code == 0 and out.startswith(first_line)
    assert err == ""


@pytest.mark.parametrize(
    "argv",
    [["compact", "--all"], ["verify", "--all"], ["gc", "--older-than", "0s"], ["compact", "--all", "--json"]],
)
def test_piped_commands_write_nothing_on_stderr(data_dir: Path, argv: list[str]) -> None:
    """Piped (a script, `| jq`), the commands write no bar, no escape code and nothing at all on stderr."""
    proc = subprocess.run(
        [*LITTLE, *argv, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_terminal_env(FORCE_COLOR="1"),
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout
    assert proc.stderr == ""
    assert "\x1b" not in proc.stdout and "━" not in proc.stdout
    assert not any(label in proc.stdout for label in ("compacting", "verifying", "deleting"))


def test_gc_reports_progress_to_its_callback(data_dir: Path) -> None:
    """`gc(progress=...)` is told the total first and then each run handled, a locked one included."""
    calls: list[tuple[int, int]] = []
    with durable.local_world(data_dir) as world:
        held = world.locks.try_acquire("run:ok-1")
        try:
            deleted = durable.gc(
                world=world, older_than=0, progress=lambda done, total: calls.append((done, total))
            )
        finally:
            world.locks.release(held)
        assert durable.gc(
            world=world, older_than=0, dry_run=True, progress=lambda d, t: calls.append((-1, -1))
        ) == ["ok-1"]
    total = len(deleted) + 1
    assert "ok-1" not in deleted and len(deleted) >= 2
    assert calls == [(i, total) for i in range(total + 1)]


def test_term_dumb_draws_no_bar(data_dir: Path) -> None:
    """A terminal that cannot redraw (TERM=dumb) gets no bar: stderr stays empty."""
    code, _, err = on_a_terminal_stderr(
        ["compact", "--all", "--data-dir", str(data_dir)], _terminal_env(TERM="dumb")
    )
    assert code == 0 and err == ""


def test_the_result_follows_the_erased_bar_on_a_shared_terminal(data_dir: Path) -> None:
    """With stdout and stderr on one terminal, the bar is drawn, erased, and only then the result printed."""
    code, _, screen = on_a_terminal_stderr(
        ["compact", "--all", "--data-dir", str(data_dir)], _terminal_env(), stdout_too=True
    )
    assert code == 0
    erased = screen.rindex("\x1b[2K")  # the bar's last line cleared
    assert screen.rindex("compacting") < erased < screen.index(f"compacted {len(FINISHED) + 1} run(s)")
    assert "\x1b" not in screen[erased + len("\x1b[2K") :]
