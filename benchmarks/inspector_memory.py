"""Whether ``little ui`` keeps growing as its pages are loaded, on SQLite and on Postgres.

Run from the repository root::

    python -m benchmarks.inspector_memory [--loads N] [--runs R] [--dsn DSN] [--bound MIB]

It makes a world of R finished runs (a step and a tool each), starts
``little ui`` on it in a process of its own, as a user does, and loads N
pages over HTTP one after the other: the run list (plain and filtered),
run pages and their live fragments (a different run each time), the
comparison of two runs, the runtime page and ``/metrics``. The server's
resident memory (``/proc/<pid>/statm``) is read every 100 loads.

The first fifth of the loads is the warm-up (imports, caches, the
connection pool, the allocator's arenas); what counts is the growth from
its end to the last load, printed per 100 loads beside the SQLite world
measured in the same run. The exit status is 1 when a backend grew by more
than ``--bound`` MiB after the warm-up (default 2).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import durable


@durable.step
async def add(x: int) -> int:
    return x + 1


@durable.tool
async def double(x: int) -> int:
    return x * 2


@durable.workflow(name="inspected")
async def inspected(n: int) -> int:
    return await double(await add(n))


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid``, in MiB."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def pages(runs: int, i: int) -> str:
    """The ``i``-th page to load: each kind of page in turn, a different run each time."""
    r = f"r{i % runs}"
    kinds = [
        "/",
        f"/runs/{r}",
        f"/runs/{r}?fragment=1",
        f"/compare?a=r0&b={r}",
        "/?status=failed",
        f"/?q={r}",
        "/runtime",
        "/metrics",
    ]
    return kinds[i % len(kinds)]


def measure(where: list[str], runs: int, loads: int) -> list[tuple[int, float]]:
    """Start ``little ui`` on ``where``, load ``loads`` pages, and sample its memory every 100 loads."""
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "-m", "durable.cli", "ui", "--port", "0", *where],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"(http://\S+)/\?token=", proc.stdout.readline())
        assert found, "little ui did not print its address"
        samples = []
        with httpx.Client(base_url=found.group(1), timeout=60) as client:
            for i in range(loads + 1):
                got = client.get(pages(runs, i))
                if got.status_code != 200:
                    raise SystemExit(f"{pages(runs, i)} answered {got.status_code}")
                if i % 100 == 0:
                    samples.append((i, rss_mib(proc.pid)))
        return samples
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def fill(world: durable.World, runs: int) -> None:
    async def go() -> None:
        for i in range(runs):
            await durable.run_workflow(inspected, i, world=world, run_id=f"r{i}")

    asyncio.run(go())


def report(name: str, samples: list[tuple[int, float]], loads: int, bound: float) -> bool:
    """Print one backend's figures; whether its growth after the warm-up stayed within ``bound``."""
    warm = next(rss for i, rss in samples if i >= loads // 5)
    last = samples[-1][1]
    growth = last - warm
    per_100 = growth / max(1, (samples[-1][0] - loads // 5) / 100)
    print(
        f"| {name} | {samples[0][1]:.1f} | {warm:.1f} | {last:.1f} | {growth:+.2f} | {per_100:+.3f} | "
        f"{'yes' if growth <= bound else 'NO'} |"
    )
    return growth <= bound


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=3000, help="pages loaded per backend (default 3000)")
    parser.add_argument("--runs", type=int, default=200, help="finished runs in each world (default 200)")
    parser.add_argument("--dsn", default=None, help="a PostgreSQL server: measure a Postgres world there too")
    parser.add_argument("--bound", type=float, default=2.0, help="MiB of growth allowed after the warm-up")
    a = parser.parse_args()
    results: dict[str, list[tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        with durable.local_world(root) as world:
            fill(world, a.runs)
        results["SQLite"] = measure(["--data-dir", str(root)], a.runs, a.loads)
    if a.dsn:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        try:
            with durable.postgres_world(a.dsn, schema=schema) as world:
                fill(world, a.runs)
            results["Postgres"] = measure(["--dsn", a.dsn, "--schema", schema], a.runs, a.loads)
        finally:
            import psycopg

            with psycopg.connect(a.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(f"## little ui's resident memory over {a.loads:,} page loads ({a.runs} runs)\n")
    print(
        "| backend | at start (MiB) | after the warm-up | at the end | growth after the warm-up "
        "| per 100 loads | within the bound |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    ok = all([report(name, samples, a.loads, a.bound) for name, samples in results.items()])
    print("\nsamples (loads: MiB):")
    for name, samples in results.items():
        print(f"- {name}: " + ", ".join(f"{i}: {rss:.1f}" for i, rss in samples))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
