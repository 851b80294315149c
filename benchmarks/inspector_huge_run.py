"""What the inspector costs on a run of a million events: its page, its live fragment, its change check.

Run from the repository root::

    python -m benchmarks.inspector_huge_run [EVENTS] [--repeats N] [--dsn DSN]

It writes one completed run of about EVENTS events into a real SQLite file
(``local_world``), in bulk through the log's own ``append`` (appends of
20,000 rows), and says how long that took. The rows are those the engine
writes for a loop of steps that each call one tool (``step.started``,
``effect.intent``, ``effect.receipt``, ``step.completed``: four per step),
taken from a real run of the same workflow and repeated with each step's
own path, input, hashes and output.

Then it times, in this process, through the inspector's app (an ASGI call,
no socket):

- the run's page (``/runs/<id>``), as a browser first opens it;
- its fragment (``?fragment=1``), what the live view fetches on every change;
- the change check (the fingerprint the live stream compares every 0.5 s);
- the physical floor: the time to read the run's last row (``last_row``).

Each figure is the median of the repeats, printed beside its ratio to the
floor; the page's size and this process's peak memory are printed too. The
target is a page in under a second. ``--dsn`` runs the same on a Postgres
world (a schema of its own, dropped at the end) after the SQLite one.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import durable
from durable.engine import encode, value_hash
from durable.store import Append

RUN_ID = "huge"
BATCH = 20_000
"""Rows per append while the run is built."""


@durable.tool
async def note(i: int) -> str:
    return f"noted {i}"


@durable.step(max_visits=10_000_000)
async def work(i: int) -> int:
    await note(i)
    return i * 2


@durable.workflow(name="huge")
async def huge(n: int) -> int:
    total = 0
    for i in range(n):
        total += await work(i)
    return total


def _template() -> list[tuple[str, dict[str, Any]]]:
    """The rows a real run of ``huge(1)`` writes: its start, one step's four rows, its end."""
    world = durable.memory_world()
    asyncio.run(durable.run_workflow(huge, 1, world=world, run_id="template"))
    rows = [(type_, json.loads(data)) for _, type_, data in world.log.read("template")]
    world.close()
    assert [t for t, _ in rows] == [
        "run.started",
        "step.started",
        "effect.intent",
        "effect.receipt",
        "step.completed",
        "run.completed",
    ], rows
    return rows


def _rows(steps: int) -> Iterator[tuple[int, str, str]]:
    """The rows of ``huge(steps)``, as the engine writes them, in seq order."""
    (_, start), (_, began), (_, intent), (_, receipt), (_, done), (_, end) = _template()
    start = {**start, "input": steps, "input_hash": value_hash(steps)}
    yield 1, "run.started", encode(start)
    seq = 1
    for i in range(steps):
        path = f"work.visit[{i}]"
        key = f"{path}.tool:note#0"
        args = {"i": i}
        h = value_hash(args)
        b = {**began, "path": path, "visit": i, "pos": i, "input_hash": h, "input": args}
        n = {**intent, "key": key, "input_hash": h, "input": args}
        r = {**receipt, "key": key, "result": f"noted {i}"}
        d = {**done, "path": path, "visit": i, "state_version": i + 1, "output": 2 * i}
        d["output_hash"] = value_hash(2 * i)
        for type_, data in (
            ("step.started", b),
            ("effect.intent", n),
            ("effect.receipt", r),
            ("step.completed", d),
        ):
            seq += 1
            yield seq, type_, encode(data)
    total = sum(2 * i for i in range(steps))
    yield (
        seq + 1,
        "run.completed",
        encode({**copy.deepcopy(end), "output": total, "output_hash": value_hash(total)}),
    )


def build(world: durable.World, events: int) -> tuple[int, float]:
    """Write the run through the log's ``append`` in batches; return its rows and the seconds it took."""
    steps = max(1, (events - 2) // 4)
    t0 = time.perf_counter()
    token = world.log.fence(RUN_ID)
    batch: list[tuple[int, str, str]] = []
    written = 0
    for row in _rows(steps):
        batch.append(row)
        if len(batch) == BATCH:
            created = ("huge", None) if written == 0 else None
            world.log.append([Append(RUN_ID, batch, token, created=created)])
            written += len(batch)
            batch = []
    world.log.append([Append(RUN_ID, batch, token, "completed", ("huge", None) if written == 0 else None)])
    written += len(batch)
    return written, time.perf_counter() - t0


def asgi_get(app: Any, path: str, query: str = "") -> tuple[int, bytes]:
    """GET ``path`` from the app in this process, as a browser on 127.0.0.1 would (no socket)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8787")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8787),
    }
    status = 0
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return status, b"".join(body)


def timed(fns: dict[str, tuple[Callable[[], Any], int]], repeats: int) -> dict[str, float]:
    """Median seconds of one call of each function, over ``repeats`` rounds taking turns.

    Each round calls every function ``inner`` times in a row (its pair), in a
    rotating order, so that a slow spell of the machine falls on all of them alike.
    """
    out: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, inner = fns[name]
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out[name].append((time.perf_counter() - t0) / inner)
    return {name: statistics.median(xs) for name, xs in out.items()}


def measure(world: durable.World, label: str, events: int, repeats: int) -> None:
    """Build the run in ``world``, then time its page, its fragment, its change check and the floor."""
    from durable.ui._app import LIVE_INTERVAL, Inspector, create_app
    from durable.ui._run_model import run_fingerprint

    rows, built = build(world, events)
    built_mb = _peak_mb()
    print(f"## {label}: a run of {rows:,} events")
    print()
    print(f"built in {built:.1f} s ({rows / built:,.0f} rows/s, appends of {BATCH:,} rows through the log)")
    print()
    app = create_app(Inspector(world, "t", {}))
    page_status, page = asgi_get(app, f"/runs/{RUN_ID}")
    assert page_status == 200, page[:400]
    figures = timed(
        {
            "read the run's last row (the floor)": (lambda: world.log.last_row(RUN_ID), 200),  # type: ignore[attr-defined]
            "the run's page": (lambda: asgi_get(app, f"/runs/{RUN_ID}"), 1),
            "its fragment (?fragment=1)": (lambda: asgi_get(app, f"/runs/{RUN_ID}", "fragment=1"), 1),
            "the live view's change check": (lambda: run_fingerprint(world, RUN_ID), 20),
        },
        repeats,
    )
    floor = figures["read the run's last row (the floor)"]
    print("| what | ms | × one row read |")
    print("|---|---:|---:|")
    for what, seconds in figures.items():
        print(f"| {what} | {seconds * 1e3:.3f} | {seconds / floor:,.1f} |")
    print()
    print(f"page size: {len(page):,} bytes; peak memory of this process: {built_mb:,.0f} MB once the run was")
    print(f"built, {_peak_mb():,.0f} MB after the pages")
    t0 = time.process_time()
    for _ in range(200):
        run_fingerprint(world, RUN_ID)
    share = (time.process_time() - t0) / 200 / LIVE_INTERVAL
    print(
        f"an open live view looks every {LIVE_INTERVAL} s: {100 * share:.3f} % of a core (this process's CPU)"
    )
    target = figures["the run's page"] < 1.0
    print(f"the run's page in under a second: {'yes' if target else 'NO'}")
    print()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inspector_huge_run")
    parser.add_argument("events", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dsn", default=None, help="also measure a Postgres world on this server")
    parser.add_argument(
        "--dir", default=None, help="where the data directory is made (default: a temporary one)"
    )
    opts = parser.parse_args(argv)
    try:
        import starlette  # noqa: F401
    except ImportError:
        sys.exit("this benchmark renders the inspector's pages: pip install -e '.[ui]'")
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        world = durable.local_world(Path(tmp) / "data")
        try:
            measure(world, "SQLite", opts.events, opts.repeats)
        finally:
            world.close()
    if opts.dsn:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        world = durable.postgres_world(opts.dsn, schema=schema)
        try:
            measure(world, "Postgres", opts.events, opts.repeats)
        finally:
            world.close()
            _drop_schema(opts.dsn, schema)
    print(f"(pid {os.getpid()}, {opts.repeats} repeat(s), medians)")


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main(sys.argv[1:])
