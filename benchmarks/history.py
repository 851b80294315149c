"""Months of history: what each listing, page and idle worker costs at 1k, 10k, 100k finished runs.

Run from the repository root::

    python -m benchmarks.history [--sizes 1000,10000,100000] [--dsn DSN] [--idle 5] [--no-sqlite]

For each size it builds a store of that many finished runs, on SQLite (a
data directory) and, with ``--dsn``, on Postgres (a schema of its own,
dropped at the end). A store is built as a worker leaves it: one real run
of a workflow of five steps and a tool is driven through a worker (and one
that fails), then its rows are copied in bulk under new run ids (its
events, its summary, its control record), one run in five a copy of the
failed one (so that the failed filter's first page is full at every
size). Copying takes seconds where driving 100k runs through a worker
takes an hour; the rows are the same.

It then times, in one sitting, the median of a few calls of each:
``little runs --limit 20``, the inspector's run list ``/`` and its
``/?status=failed``, ``little doctor``, a handle's ``status()`` and
``result()``, the CPU an idle ``little worker`` spends per second of wall
time, and ``little gc`` of the older half (runs deleted per second). It
prints one table per backend with the growth factor from the smallest
size, and the time each store took to build.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import durable
from benchmarks.systems.durable_rt import cpu_seconds, stop

ROOT = Path(__file__).resolve().parents[1]
QUEUE = durable.Queue("history")
FAIL_EVERY = 5
"""One run in this many is a copy of the failed run (the failed filter's page of 200 is full at any size)."""


@durable.step(max_visits=5)
async def part(i: int, k: int) -> int:
    return i + k


@durable.tool
async def notify(i: int) -> str:
    return f"sent {i}"


@durable.workflow(name="lengthy")
async def lengthy(i: int) -> str:
    total = 0
    for k in range(5):
        total += await part(i, k)
    if i < 0:
        raise ValueError(f"bad input {i}")
    return await notify(total)


WORKFLOWS = [lengthy]


# -- building a store ---------------------------------------------------------------


def _templates(world: durable.World) -> tuple[str, str]:
    """One completed and one failed run of ``lengthy``, driven by a worker as a user's are."""

    async def go() -> None:
        async with durable.Worker(world, workflows=WORKFLOWS, queues=[QUEUE]):
            ok = durable.start_workflow(lengthy, 1, world=world, run_id="tpl-ok", queue=QUEUE)
            bad = durable.start_workflow(lengthy, -1, world=world, run_id="tpl-bad", queue=QUEUE)
            await ok.result()
            with contextlib.suppress(ValueError):
                await bad.result()

    asyncio.run(go())
    return "tpl-ok", "tpl-bad"


def _copies(n: int) -> list[tuple[str, str, float]]:
    """``(new run id, template, created_at)`` of ``n`` runs, one a second, oldest first."""
    start = time.time() - n - 3600
    return [
        (f"h{i:08d}", "tpl-bad" if i % FAIL_EVERY == FAIL_EVERY - 1 else "tpl-ok", start + i)
        for i in range(n)
    ]


def build_sqlite(root: Path, n: int) -> None:
    """A data directory of ``n`` finished runs (copies of two real ones)."""
    with durable.local_world(root) as world:
        _templates(world)
    copies = _copies(n)
    with contextlib.closing(sqlite3.connect(root / "events.db")) as db:
        db.execute("CREATE TEMP TABLE c (run_id TEXT, tpl TEXT, at REAL)")
        db.executemany("INSERT INTO c VALUES (?, ?, ?)", copies)
        cols = [
            r[1]
            for r in db.execute("PRAGMA table_info(runs)")
            if r[1] not in ("run_id", "created_at", "updated_at")
        ]
        db.execute(
            f"INSERT INTO runs (run_id, created_at, updated_at, {', '.join(cols)}) "
            f"SELECT c.run_id, c.at, c.at + 1, {', '.join('r.' + x for x in cols)} "
            "FROM c JOIN runs r ON r.run_id = c.tpl"
        )
        db.execute(
            "INSERT INTO events (run_id, seq, type, data, written_at) "
            "SELECT c.run_id, e.seq, e.type, e.data, c.at FROM c JOIN events e ON e.run_id = c.tpl"
        )
        db.commit()
    with contextlib.closing(sqlite3.connect(root / "runtime.db")) as db:
        db.execute("CREATE TEMP TABLE c (run_id TEXT, tpl TEXT, at REAL)")
        db.executemany("INSERT INTO c VALUES (?, ?, ?)", copies)
        cols = [
            r[1]
            for r in db.execute("PRAGMA table_info(control)")
            if r[1] not in ("run_id", "created_at", "seq")
        ]
        db.execute(
            f"INSERT INTO control (run_id, created_at, seq, {', '.join(cols)}) "
            f"SELECT c.run_id, c.at, c.rowid + 1000, {', '.join('t.' + x for x in cols)} "
            "FROM c JOIN control t ON t.run_id = c.tpl"
        )
        db.commit()


def build_postgres(dsn: str, schema: str, n: int) -> None:
    """A schema of ``n`` finished runs (copies of two real ones)."""
    import psycopg

    with durable.postgres_world(dsn, schema=schema) as world:
        _templates(world)
    copies = _copies(n)
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE TEMP TABLE c (run_id TEXT, tpl TEXT, at DOUBLE PRECISION)")
        with conn.cursor().copy("COPY c (run_id, tpl, at) FROM STDIN") as cp:
            for row in copies:
                cp.write_row(row)

        def columns(table: str, own: tuple[str, ...]) -> list[str]:
            rows = conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s",
                (schema, table),
            ).fetchall()
            return [r[0] for r in rows if r[0] not in own]

        cols = columns("runs", ("run_id", "created_at", "updated_at"))
        conn.execute(
            f"INSERT INTO runs (run_id, created_at, updated_at, {', '.join(cols)}) "
            f"SELECT c.run_id, c.at, c.at + 1, {', '.join('r.' + x for x in cols)} "
            "FROM c JOIN runs r ON r.run_id = c.tpl"
        )
        cols = columns("events", ("run_id", "written_at"))
        conn.execute(
            f"INSERT INTO events (run_id, written_at, {', '.join(cols)}) "
            f"SELECT c.run_id, c.at, {', '.join('e.' + x for x in cols)} "
            "FROM c JOIN events e ON e.run_id = c.tpl"
        )
        cols = columns("control", ("run_id", "created_at", "seq"))
        conn.execute(
            f"INSERT INTO control (run_id, created_at, seq, {', '.join(cols)}) "
            f"SELECT c.run_id, c.at, nextval('control_seq'), {', '.join('t.' + x for x in cols)} "
            "FROM c JOIN control t ON t.run_id = c.tpl"
        )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:  # as autovacuum leaves a store that has aged
        conn.execute(f'VACUUM ANALYZE "{schema}".runs, "{schema}".events, "{schema}".control')


# -- timing -------------------------------------------------------------------------


def median_s(fn: Callable[[], object], reps: int = 9) -> float:
    """The median wall time of ``fn()`` over ``reps`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def little(*argv: str) -> None:
    """``little ARGV`` in this process, its output swallowed (a non-zero exit is an error)."""
    from durable.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    if code not in (0, 1):  # doctor exits 1 when it finds something to say
        raise RuntimeError(f"little {' '.join(argv)} exited {code}")


@contextlib.contextmanager
def inspector(world: durable.World) -> Iterator[Any]:
    from starlette.testclient import TestClient

    from durable.ui._app import Inspector, create_app

    with TestClient(create_app(Inspector(world, "bench", {})), base_url="http://127.0.0.1:8787") as client:
        yield client


def idle_cpu(where: list[str], seconds: float) -> float:
    """The share of a core an idle ``little worker`` on ``where`` spends, after a warm-up second."""
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable.cli",
            "worker",
            "benchmarks.history:WORKFLOWS",
            "--queue",
            QUEUE.name,
            *where,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert p.stdout is not None
        if "little worker" not in p.stdout.readline():
            raise RuntimeError("the worker did not start")
        time.sleep(1.0)
        c0, t0 = cpu_seconds(p.pid) or 0.0, time.perf_counter()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(p.pid) or 0.0, time.perf_counter()
        return (c1 - c0) / (t1 - t0)
    finally:
        stop(p)


def measure(
    open_world: Callable[[], durable.World], where: list[str], n: int, idle: float
) -> dict[str, float]:
    """Every figure of one store of ``n`` runs."""
    out: dict[str, float] = {}
    out["little runs --limit 20 (s)"] = median_s(lambda: little("runs", *where, "--limit", "20", "--json"))
    world = open_world()
    try:
        with inspector(world) as client:

            def page(path: str) -> None:
                got = client.get(path)
                assert got.status_code == 200, (path, got.status_code)

            out["inspector / (s)"] = median_s(lambda: page("/"))
            out["inspector /?status=failed (s)"] = median_s(lambda: page("/?status=failed"))
            shown = client.get("/?status=failed").text.count("<tr data-run-id=")
            out["failed runs on the filter's first page (of 200)"] = shown / 200
        mid = f"h{n // 2:08d}"
        h = durable.handle(mid, world=world)
        out["status() (s)"] = median_s(lambda: asyncio.run(h.status()))
        out["result() (s)"] = median_s(lambda: asyncio.run(h.result()))
    finally:
        world.close()
    out["little doctor (s)"] = median_s(lambda: little("doctor", *where), reps=3)
    out["idle worker (share of a core)"] = idle_cpu(where, idle)
    world = open_world()
    try:
        from durable.ops import gc

        t0 = time.perf_counter()
        deleted = len(gc(world=world, older_than=n / 2 + 3600))  # the copies are one a second apart
        took = time.perf_counter() - t0
        out["gc of half (runs/s)"] = deleted / took if took else 0.0
    finally:
        world.close()
    return out


# -- the report ----------------------------------------------------------------------


def table(name: str, results: dict[int, dict[str, float]], built: dict[int, float]) -> str:
    sizes = sorted(results)
    first = sizes[0]
    rows = [
        f"### {name}\n",
        "| | " + " | ".join(f"{s:,} runs" for s in sizes) + f" | growth from {first:,} |",
    ]
    rows.append("|---|" + "---:|" * (len(sizes) + 1))
    for key in results[first]:
        vals = [results[s][key] for s in sizes]
        cells = [f"{v:.3g}" if v < 100 else f"{v:,.0f}" for v in vals]
        growth = f"{vals[-1] / vals[0]:.2f}×" if vals[0] else "-"
        rows.append(f"| {key} | " + " | ".join(cells) + f" | {growth} |")
    rows.append("| building the store (s) | " + " | ".join(f"{built[s]:.1f}" for s in sizes) + " | |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="store sizes, comma-separated")
    parser.add_argument("--dsn", default=None, help="a PostgreSQL server: measure Postgres stores there too")
    parser.add_argument(
        "--idle", type=float, default=5.0, help="seconds an idle worker is measured (default 5)"
    )
    parser.add_argument("--no-sqlite", action="store_true", help="measure Postgres only")
    a = parser.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    report = []
    if not a.no_sqlite:
        results, built = {}, {}
        for n in sizes:
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp) / "data"
                t0 = time.perf_counter()
                build_sqlite(root, n)
                built[n] = time.perf_counter() - t0
                results[n] = measure(
                    lambda root=root: durable.local_world(root), ["--data-dir", str(root)], n, a.idle
                )
            print(f"SQLite {n:,}: {results[n]}", file=sys.stderr, flush=True)
        report.append(table("SQLite (a data directory)", results, built))
    if a.dsn:
        import psycopg

        results, built = {}, {}
        for n in sizes:
            schema = f"bench_history_{uuid.uuid4().hex[:10]}"
            try:
                t0 = time.perf_counter()
                build_postgres(a.dsn, schema, n)
                built[n] = time.perf_counter() - t0
                results[n] = measure(
                    lambda schema=schema: durable.postgres_world(a.dsn, schema=schema),
                    ["--dsn", a.dsn, "--schema", schema],
                    n,
                    a.idle,
                )
            finally:
                with psycopg.connect(a.dsn, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            print(f"Postgres {n:,}: {results[n]}", file=sys.stderr, flush=True)
        report.append(table("Postgres", results, built))
    print("\n\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
