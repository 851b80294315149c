"""The human-approval recipe runs from the repository root and shows the whole cycle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_human_approval_recipe_waits_then_finishes_after_the_answer() -> None:
    """The recipe exits 0, shows the run waiting in `little replay`, then finishes with one draft."""
    proc = subprocess.run(
        [sys.executable, "cookbook/human_approval.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "The run waits at 'interrupt#1'" in out
    assert "status: interrupted" in out
    assert "waiting_for_answer:\n  interrupt#1" in out
    assert "refunded 49.90 EUR for order-1042" in out
    assert "drafted 1 time(s)" in out
