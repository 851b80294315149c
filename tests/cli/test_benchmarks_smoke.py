"""The benchmark harness runs end to end at tiny sizes, so it never rots."""

from __future__ import annotations

import importlib
import json
import os
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


def _peer(module: str) -> None:
    """Skip without the ``bench`` extra's ``module``; under ``CI=true`` (which installs it) fail instead."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the benchmark harness beside its peers (.ci/run installs bench): {exc}")
        pytest.skip(f"{module} is not installed: pip install -e '.[bench]'")


def _smoke(tmp_path: Path, *extra: str) -> str:
    return _python("-m", "benchmarks", "--smoke", "--quiet", "--out", str(tmp_path), *extra)


def test_smoke_run_reports_every_target(tmp_path: Path) -> None:
    """``--smoke`` measures every scenario for durable and the floor (the codec's too), prints the table."""
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
    # The codec's cost runs by default (cryptography comes with the dev and bench extras).
    assert "| h a | durable + codec |" in out
    assert "| h b | durable + codec |" in out
    assert "| a process | raw SQLite |" in out
    assert list(tmp_path.glob("*-smoke.md"))
    assert list(tmp_path.glob("*-smoke.json"))


@pytest.mark.slow
def test_smoke_run_with_peers(tmp_path: Path) -> None:
    """With the ``bench`` extra installed, the peers run in the same smoke pass."""
    _peer("dbos")
    _peer("langgraph.checkpoint.sqlite")
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
    _peer("dbos")
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
    assert next(r for r in rows if r[0].strip() == "floor")[4].strip() == "1.00×"  # the CPU ratio


def test_run_cost_counts_a_queued_runs_statements_and_little_workers_log_records() -> None:
    """``python -m benchmarks.run_cost`` drains queued runs both ways, and once more with the worker's log."""
    out = _python("-m", "benchmarks.run_cost", "20")
    rows = {r[0].strip(): r for r in (line.split("|")[1:-1] for line in out.splitlines()) if r}
    assert {"process", "power", "process, little worker's log"} <= set(rows)
    assert float(rows["process"][5]) == 0.0
    # A queued run that completes says three things at INFO: claimed, started, completed.
    assert float(rows["process, little worker's log"][5]) == 3.0
    assert float(rows["process"][4]) > 0  # statements were counted


def test_opcodes_by_function_lists_where_a_step_goes_and_the_same_total() -> None:
    """``opcodes.py write --by-function`` names the step's own functions and sums to the per-step total."""
    out = _python("benchmarks/opcodes.py", "write", "--by-function")
    *functions, total = out.strip().splitlines()
    assert total.startswith("write per_step_opcodes=")
    assert any("durable/engine/_steps.py" in line and "step_begin" in line for line in functions)
    listed = sum(float(line.split()[0]) for line in functions)
    per_step = float(total.split("=")[1])
    assert per_step > 0 and abs(listed - per_step) <= 0.02 * per_step  # left out: under 0.5 each


def test_the_announcement_benchmark_compares_the_keyed_listener_with_filters() -> None:
    """``python -m benchmarks.notify_fanout`` prints both ways at every count of waiting results."""
    out = _python("-m", "benchmarks.notify_fanout", "400", "--repeats", "1")
    rows = [line for line in out.splitlines() if line.startswith("| 1") and "µs" not in line]
    assert {(r.split("|")[1].strip(), r.split("|")[2].strip()) for r in rows} == {
        (w, way) for w in ("1", "100", "1,000", "10,000") for way in ("keyed", "filter each")
    }
    assert "the listener's whole announcement" in out and "a plain dict's memory alone" in out
    assert "filter each / keyed at 10,000 results awaited = " in out


def test_the_cancellation_watch_benchmark_compares_the_partial_index_with_the_read_by_id() -> None:
    """``python -m benchmarks.cancel_watch`` prints both reads at every number of runs driven."""
    out = _python("-m", "benchmarks.cancel_watch", "20", "--repeats", "1")
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| 1")]
    assert {(r[1].strip(), r[2].strip()) for r in rows} == {
        (n, way) for n in ("1", "10", "100", "1,000") for way in ("partial index", "by run id")
    }
    assert "by run id / partial index with 1,000 runs driven = " in out


def test_the_inspector_benchmark_times_a_long_run_s_page_beside_one_row_read() -> None:
    """``python -m benchmarks.inspector_huge_run`` builds a run, times its page, fragment and change check."""
    dsn = os.environ.get("DURABLE_TEST_PG_DSN")
    out = _python(
        "-m", "benchmarks.inspector_huge_run", "2000", "--repeats", "1", *(["--dsn", dsn] if dsn else [])
    )
    for backend in ("SQLite", *(["Postgres"] if dsn else [])):
        part = out.split(f"## {backend}: a run of 1,998 events", 1)[1].split("##", 1)[0]
        assert "built in " in part
        rows = {
            r[1].strip(): r for r in (line.split("|") for line in part.splitlines() if line.startswith("| "))
        }
        assert set(rows) >= {
            "read the run's last row (the floor)",
            "the run's page",
            "its fragment (?fragment=1)",
            "the live view's change check",
        }
        assert rows["read the run's last row (the floor)"][3].strip() == "1.0"
        assert float(rows["the run's page"][2]) > 0
        assert "the run's page in under a second: " in part


def test_the_inspector_memory_benchmark_samples_the_server_and_reports_its_growth() -> None:
    """``python -m benchmarks.inspector_memory`` loads pages from a real little ui and reports its memory."""
    dsn = os.environ.get("DURABLE_TEST_PG_DSN")
    out = _python(
        "-m",
        "benchmarks.inspector_memory",
        "--loads",
        "200",
        "--runs",
        "5",
        "--bound",
        "1000",
        *(["--dsn", dsn] if dsn else []),
    )
    rows = {r[1].strip(): r for r in (line.split("|") for line in out.splitlines() if line.startswith("| "))}
    assert set(rows) >= {"SQLite", *(["Postgres"] if dsn else [])}
    for backend in ("SQLite", *(["Postgres"] if dsn else [])):
        assert float(rows[backend][3]) > 0 and rows[backend][7].strip() in ("yes", "NO")
        assert f"- {backend}: 0: " in out


def test_the_drift_benchmark_reports_the_spread_of_each_measure_over_fresh_processes() -> None:
    """``python -m benchmarks.drift`` times the loop, durable and the floor in fresh processes."""
    out = _python("-m", "benchmarks.drift", "2", "--steps", "20")
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ")][
        1:
    ]  # past the header
    assert [r[0].strip() for r in rows] == [
        "ms of CPU, a pure-Python loop of 300,000 rounds",
        "µs / step, durable (a) process",
        "µs / step, raw SQLite commit",
    ]
    for r in rows:
        fastest, median, slowest = (float(x) for x in r[1:4])
        assert 0 < fastest <= median <= slowest


def test_the_idle_worker_benchmark_measures_runs_with_and_without_a_worker_beside() -> None:
    """``python -m benchmarks.idle_worker`` prints both wall times and the idle worker's CPU."""
    out = _python("-m", "benchmarks.idle_worker", "10", "--rounds", "1")
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| ")][1:]  # past the header
    figures = {r[1].strip(): float(r[2]) for r in rows}
    assert set(figures) >= {
        "wall µs per run, no worker",
        "wall µs per run, an idle worker beside",
        "the idle worker's CPU µs per run",
    }
    assert figures["wall µs per run, no worker"] > 0


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


def _postgres_server_available() -> bool:
    from benchmarks import pg_server

    return pg_server.available() is None


@pytest.mark.skipif(not _postgres_server_available(), reason="no PostgreSQL server binaries (initdb, pg_ctl)")
def test_postgres_smoke_run_starts_its_own_server_and_reports_every_target(tmp_path: Path) -> None:
    """``python -m benchmarks.postgres --smoke`` starts a server, measures every scenario."""
    out = _python("-m", "benchmarks.postgres", "--smoke", "--quiet", "--no-peers", "--out", str(tmp_path))
    for target in ("(pa)", "(pq)", "(pi)", "(pk)"):
        assert f"| {target} |" in out
    for scenario in ("pa", "pq", "pi 1 worker", "pi 2 workers", "pi 4 workers", "pk"):
        assert f"| {scenario} | durable (Postgres) |" in out
    assert "| pa | raw psycopg |" in out
    assert "| PostgreSQL fsync | on |" in out
    assert list(tmp_path.glob("*-postgres-smoke.json"))


@pytest.mark.skipif(not _postgres_server_available(), reason="no PostgreSQL server binaries (initdb, pg_ctl)")
def test_the_group_append_benchmark_measures_every_group_size_both_ways() -> None:
    """``python -m benchmarks.pg_group_append`` starts a server and prints a row per size and way."""
    out = _python("-m", "benchmarks.pg_group_append", "24", "--repeats", "1")
    for size in (1, 3, 8):
        for way in ("grouped", "grouped, replanned", "alone"):
            assert f"| {size} | {way} |" in out
    assert "24 runs per measurement, median of 1" in out


def test_the_page_command_rewrites_only_the_marked_section_and_draws_the_charts(tmp_path: Path) -> None:
    """``python -m benchmarks.page --from`` puts a run's reports between the markers and writes the charts."""
    _peer("matplotlib")
    from benchmarks.page import END, START

    runs = tmp_path / "run"
    runs.mkdir()
    figures = {
        "a process | durable": [{"per_us": 20.0, "seconds": 0.02}],
        "a process | raw SQLite": [{"per_us": 10.0, "seconds": 0.01}],
        "pi 1 worker | durable (Postgres)": [{"per_s": 100.0}],
        "pi 2 workers | durable (Postgres)": [{"per_s": 180.0}],
    }
    (runs / "20260101T000000-sqlite.json").write_text(json.dumps(figures))
    (runs / "20260101T000000-sqlite.md").write_text("# title\n\n## Targets\n\n| a | b |\n")
    page = tmp_path / "page.md"
    page.write_text(f"before\n\n{START}\nold figures\n{END}\n\nafter\n")
    images = tmp_path / "images"
    _python("-m", "benchmarks.page", "--from", str(runs), "--page", str(page), "--images", str(images))
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n")
    assert "old figures" not in text and "#### Targets" in text
    assert "![" in text and "images/perf-per-step.svg" in text
    assert sorted(p.name for p in images.iterdir()) == ["perf-per-step.svg", "perf-throughput.svg"]


@pytest.mark.slow
def test_compare_trees_measures_two_trees_in_turns_and_prints_both_opcode_counts(tmp_path: Path) -> None:
    """``compare_trees.py --smoke`` on this tree against itself prints every figure and both opcode counts."""
    out = _python("benchmarks/compare_trees.py", ".", ".", "--rounds", "1", "--smoke", "--out", str(tmp_path))
    assert "| a process | durable, wall (µs/step) |" in out
    assert "| h queue | durable (ms) |" in out
    opcodes = [line for line in out.splitlines() if line.startswith("| opcodes ")]
    assert [line.split("|")[1].strip() for line in opcodes] == ["opcodes write", "opcodes replay"]
    assert (tmp_path / "compare_trees.json").exists()


def test_the_replay_parts_benchmark_splits_a_replayed_step_and_estimates_a_column_layout() -> None:
    """``python -m benchmarks.replay_parts`` times each part of a replay and a column layout's read."""
    out = _python("-m", "benchmarks.replay_parts", "30", "--rounds", "1")
    rows = {
        r[0].strip(): (float(r[1]), float(r[2]))
        for r in (line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| "))
        if r[1].strip() not in ("wall", "---:")
    }
    assert list(rows) == [
        "read",
        "parse",
        "index",
        "calls (what is left)",
        "durable replay",
        "plain await",
        "durable replay above plain calls",
        "column layout: read + parse + index",
        "column layout's estimate above plain calls",
    ]
    # Before timing, the benchmark checks that the column layout indexes every step's input
    # hash and output as the engine's index does (it fails otherwise): the estimate replays.
    for name in ("read", "parse", "column layout: read + parse + index"):  # timed alone
        assert all(v > 0 for v in rows[name]), name
