"""The benchmark harness runs end to end at tiny sizes, so it never rots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python(*argv: str) -> str:
    """Run ``python *argv`` from the repository root; return its output after checking it succeeded."""
    proc = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _smoke(tmp_path: Path, *extra: str) -> str:
    return _python("-m", "benchmarks", "--smoke", "--quiet", "--out", str(tmp_path), *extra)


def test_smoke_run_reports_every_target(tmp_path: Path) -> None:
    """``--smoke`` measures every scenario for durable and the floor and prints the table."""
    out = _smoke(tmp_path, "--no-peers")
    for target in (
        "(a) process",
        "(a) power",
        "(b) power",
        "(c)",
        "(d) power",
        "(e)",
        "(f)",
        "(g)",
    ):
        assert f"| {target} |" in out
    assert "| a process | raw SQLite |" in out
    assert list(tmp_path.glob("*-smoke.md"))
    assert list(tmp_path.glob("*-smoke.json"))


@pytest.mark.slow
def test_smoke_run_with_peers(tmp_path: Path) -> None:
    """With the ``bench`` extra installed, the peers run in the same smoke pass."""
    pytest.importorskip("dbos")
    pytest.importorskip("langgraph.checkpoint.sqlite")
    out = _smoke(tmp_path)
    assert "| a process | DBOS (WAL) |" in out
    assert "| a process | LangGraph |" in out


def test_runtime_smoke_run_reports_latency_throughput_and_recovery(tmp_path: Path) -> None:
    """``python -m benchmarks.runtime --smoke`` measures every runtime scenario for durable."""
    out = _python("-m", "benchmarks.runtime", "--smoke", "--quiet", "--no-peers", "--out", str(tmp_path))
    for target in ("(h) queue", "(i 1 worker)", "(i 2 workers)", "(j)"):
        assert f"| {target} |" in out
    for scenario in ("h in-process", "h queue", "i 1 worker", "i 2 workers", "j"):
        assert f"| {scenario} | durable |" in out
    assert "| h queue | durable (power) |" in out
    assert list(tmp_path.glob("*-runtime-smoke.md"))
    assert list(tmp_path.glob("*-runtime-smoke.json"))


@pytest.mark.slow
def test_runtime_smoke_run_with_dbos(tmp_path: Path) -> None:
    """With DBOS installed, its in-process start, its queue (default and 10 ms poll) run beside durable."""
    pytest.importorskip("dbos")
    out = _python("-m", "benchmarks.runtime", "--smoke", "--quiet", "--out", str(tmp_path))
    assert "| h in-process | DBOS |" in out
    assert "| h queue | DBOS (poll 1 s, default) |" in out
    assert "| i 2 workers | DBOS (poll 10 ms) |" in out


def test_python_bound_compares_a_bare_step_with_the_floor_and_durable() -> None:
    """``benchmarks/python_bound.py`` runs at a tiny size and prints its write and replay tables."""
    out = _python("benchmarks/python_bound.py", "20")
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ")]
    names = [r[0].strip() for r in rows if r[0].strip() not in ("loop", "replay", "---")]
    assert names == ["floor", "bare step", "durable", "plain await", "bare replay", "durable replay"]
    assert next(r for r in rows if r[0].strip() == "floor")[2].strip() == "1.00×"
    assert next(r for r in rows if r[0].strip() == "plain await")[2].strip() == "0.00"


def test_talk_latency_measures_durable_between_two_processes() -> None:
    """The talk benchmark runs a peer process and prints both latencies for durable."""
    out = _python("-m", "benchmarks.talk_latency", "--n", "5", "--gap", "0.005", "--systems", "durable")
    assert "durable   send -> recv" in out
    assert "durable   write_stream -> read_stream" in out
    assert "(n=5)" in out


def test_the_budget_benchmark_compares_a_budgeted_model_call_with_an_unbudgeted_one() -> None:
    """benchmarks/budget_cost.py prints both kinds of call and their difference, with opcode counts."""
    out = _python("-m", "benchmarks.budget_cost", "--calls", "10", "--repeats", "1")
    lines = out.splitlines()
    assert lines[0].startswith("unbudgeted: wall_us_per_call=")
    assert lines[1].startswith("budgeted: wall_us_per_call=")
    assert "opcodes_per_call=" in lines[2] and lines[2].startswith("difference:")


@pytest.mark.slow
def test_compare_trees_measures_two_trees_in_turns_and_prints_both_opcode_counts(tmp_path: Path) -> None:
    """``compare_trees.py --smoke`` on this tree against itself prints every figure and both opcode counts."""
    out = _python("benchmarks/compare_trees.py", ".", ".", "--rounds", "1", "--smoke", "--out", str(tmp_path))
    assert "| a process | durable, wall (µs/step) |" in out
    assert "| h queue | durable (ms) |" in out
    opcodes = [line for line in out.splitlines() if line.startswith("| opcodes ")]
    assert [line.split("|")[1].strip() for line in opcodes] == ["opcodes write", "opcodes replay"]
    assert (tmp_path / "compare_trees.json").exists()
