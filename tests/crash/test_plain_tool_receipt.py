"""A plain tool's receipt is durable before its result reaches the caller (real SIGKILL)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durable

ROOT = Path(__file__).resolve().parents[2]


def _spawn(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.procs.plain_tool", str(data), "r", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("durability", ["process", "power"])
def test_a_kill_right_after_a_plain_tool_returned_is_not_an_unknown_commit(
    tmp_path: Path, durability: str
) -> None:
    """Killed in synchronous code after the tool returned: the resume replays the receipt."""
    killed = _spawn(tmp_path, "kill", durability)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with durable.local_world(tmp_path) as world:
        types = [t for _, t, _ in world.log.read("r")]
    assert "effect.receipt" in types  # the receipt reached the log before the kill
    resumed = _spawn(tmp_path, "run", durability)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == "charged 5"
    assert (tmp_path / "bodies.log").read_text().split() == ["charge"]
