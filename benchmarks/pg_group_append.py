"""What group commit buys on Postgres: a run's three appends, grouped with other runs' or alone.

Run from the repository root::

    python -m benchmarks.pg_group_append [RUNS] [--repeats N]

The harness starts a throwaway server (``pg_server``: fsync on). For each
group size G (1, 3 and 8 runs), each run writes what a one-step run writes,
its start, its step and its end (one ~230-byte row each, the start creating
the run and the end setting its status), in one of two ways:

- ``grouped``: the G runs' starts in one ``PostgresLog.append_each``, then
  their steps in one, then their ends in one (what a worker's group commit
  sends when G of its runs commit in the same turn of the event loop);
- ``alone``: every append its own ``PostgresLog.append`` (what each run sends
  when it is driven alone);
- ``grouped, replanned``: as ``grouped``, on a session set back to the
  server's default ``plan_cache_mode = auto``, under which the grouped
  statement is planned anew at every execution (the world's sessions keep
  one generic plan per statement).

It prints, per run, the server's CPU (every process under the postmaster,
from ``/proc``), this process's CPU (psycopg and the log's Python) and the
wall time, each the median over the repeats, the two ways taking turns. A
group of one is the plain append both ways.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from benchmarks.pg_server import available, server_cpu, start

SIZES = (1, 3, 8)
WAYS = ("grouped", "grouped, replanned", "alone")
_ROW = json.dumps(
    {
        "path": "io_call",
        "visit": 0,
        "attempt": 1,
        "input_hash": "88799cc8662f1ebd3e2bad3d10cf0acd",
        "pos": 0,
        "input": {"i": 3},
        "output_hash": "c3585b60b755fb13e6e65a16d20f1230",
        "state_version": 1,
        "ms": 10.236,
        "output": 3,
    }
)


def _measure(dsn: str, postmaster: int, schema: str, way: str, size: int, runs: int) -> dict[str, float]:
    from durable.store import Append
    from durable.store.log._postgres import PostgresLog
    from durable.store.postgres._schema import connect

    db = connect(dsn, schema=schema, min_size=1, max_size=1, reconnect_timeout=5, connect_timeout=10)
    if way == "grouped, replanned":  # the pool's one session
        db.run(lambda conn, attempt: conn.execute("SET plan_cache_mode = auto"))
    log = PostgresLog(db, owns=True)
    try:
        names = [f"r{k}" for k in range(runs)]
        tokens = {r: log.fence(r) for r in names}
        groups = [names[k : k + size] for k in range(0, runs, size)]

        def write(batch: list[Append]) -> None:
            if way != "alone" and len(batch) > 1:
                assert log.append_each(batch) == [None] * len(batch)
            else:
                for a in batch:
                    log.append([a])

        s0, c0, t0 = server_cpu(postmaster), time.process_time(), time.perf_counter()
        for group in groups:
            write([Append(r, [(1, "run.started", _ROW)], tokens[r], created=("wf", None)) for r in group])
            write([Append(r, [(2, "step.completed", _ROW)], tokens[r]) for r in group])
            write([Append(r, [(3, "run.completed", _ROW)], tokens[r], status="completed") for r in group])
        wall, client, server = time.perf_counter() - t0, time.process_time() - c0, server_cpu(postmaster) - s0
        n = len(names)
        return {"server_us": server / n * 1e6, "client_us": client / n * 1e6, "wall_us": wall / n * 1e6}
    finally:
        db.run(lambda conn, attempt: conn.execute(f"DROP SCHEMA IF EXISTS {db.s} CASCADE"))
        log.close()


def main(argv: list[str] | None = None) -> int:
    """Measure every group size both ways and print the markdown table."""
    args = list(sys.argv[1:] if argv is None else argv)
    repeats = 3
    if "--repeats" in args:
        at = args.index("--repeats")
        repeats = int(args[at + 1])
        del args[at : at + 2]
    runs = int(args[0]) if args else 1200
    why = available()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    server = start()
    try:
        dsn = server.create_database("durable")
        postmaster = server.postmaster_pid()
        got: dict[tuple[int, str], list[dict[str, float]]] = {}
        for rep in range(repeats):
            for size in SIZES:
                ways = WAYS if rep % 2 == 0 else WAYS[::-1]
                for k, way in enumerate(ways):
                    schema = f"g{size}_{k}_{rep}"
                    got.setdefault((size, way), []).append(_measure(dsn, postmaster, schema, way, size, runs))
        version = server.settings()["server_version"]
        print(f"{runs} runs per measurement, median of {repeats}; PostgreSQL {version}")
        print()
        print("| runs per group | way | server CPU µs / run | client CPU µs / run | wall µs / run |")
        print("|---:|---|---:|---:|---:|")
        for size in SIZES:
            for way in WAYS:
                runs_of = got[(size, way)]
                m: dict[str, Any] = {k: statistics.median(r[k] for r in runs_of) for k in runs_of[0]}
                cells = f"{m['server_us']:,.0f} | {m['client_us']:,.0f} | {m['wall_us']:,.0f}"
                print(f"| {size} | {way} | {cells} |")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
