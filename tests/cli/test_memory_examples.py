"""The memory recipe and the memory benchmark run as people run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_agent_memory_recipe_answers_from_an_earlier_run(tmp_path: Path) -> None:
    """The recipe's second run answers from facts its first run stored."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cookbook" / "agent_memory.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "the agent answers: 'You told me: I drink green tea every morning.'" in proc.stdout
    assert "the agent answers: 'You told me: My bike is red.'" in proc.stdout


def test_benchmark_smoke_run_has_exact_recall(tmp_path: Path) -> None:
    """The benchmark's smoke mode runs, prints its table and finds durable's recall to be 1.0."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "memory_bench.py"), "--smoke", "--no-peers"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "| durable" in line)
    assert "| 1.000 |" in row
