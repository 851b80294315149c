"""durable on ``postgres_world``: steps in process, a queue served by worker processes, takeover.

Every measurement has a schema of its own in the database ``durable`` of the
harness's server. Worker processes are ``Worker.run()`` in ``python -m
benchmarks.systems.durable_pg serve DSN SCHEMA CONCURRENCY LEASE NAME`` (what
``little worker --dsn`` runs, with the lease and the concurrency as options).
The figures of CPU time split the cost of a run between the worker
processes, the measuring process (the client: enqueue and wait) and the
server (every process under the postmaster, from ``/proc``); the statements
and commits per run come from the server's own counters
(``pg_stat_statements``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import durable
from benchmarks.pg_server import counters, server_cpu
from benchmarks.systems.durable_rt import QUEUE, WARM, _summary, cpu_seconds, held, one_step, spawn, stop
from benchmarks.systems.durable_sys import RUN_ID, sequential
from durable.runtime._driver import control_of

ROOT = Path(__file__).resolve().parents[2]
IO_WAIT = 0.05  # the one call of an I/O-bound run awaits this long


@durable.step
async def io_call(i: int) -> int:
    await asyncio.sleep(IO_WAIT)
    return i


@durable.workflow
async def io_run(i: int) -> int:
    return await io_call(i)


WORKFLOWS = [one_step, io_run, held]


def _trace(role: str) -> None:
    """Count this process's statements by caller when ``BENCH_SQL_TRACE`` names a folder (``sql_trace``)."""
    folder = os.environ.get("BENCH_SQL_TRACE")
    if folder:
        from benchmarks import sql_trace

        sql_trace.install(os.path.join(folder, f"{role}-{os.getpid()}.json"))


def _world(dsn: str, schema: str, lease: float = 10.0) -> durable.PostgresWorld:
    return durable.postgres_world(dsn, schema=schema, lease=lease)


def seq(dsn: str, schema: str, n: int, pg: dict[str, Any]) -> dict[str, Any]:
    """``n`` sequential trivial steps in one run, in this process."""
    with _world(dsn, schema) as world:
        asyncio.run(durable.run_workflow(sequential, 3, world=world, run_id="warm"))
        before = counters(pg["admin"], pg["db"])
        s0, c0, t0 = server_cpu(pg["pid"]), time.process_time(), time.perf_counter()
        asyncio.run(durable.run_workflow(sequential, n, world=world, run_id=RUN_ID))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        server = server_cpu(pg["pid"]) - s0
        after = counters(pg["admin"], pg["db"])
    return {
        "seconds": seconds,
        "per_us": seconds / n * 1e6,
        "cpu_us": cpu / n * 1e6,
        "server_cpu_us": server / n * 1e6,
        **_per(before, after, n, "step"),
    }


def _per(before: dict[str, Any], after: dict[str, Any], n: int, what: str) -> dict[str, Any]:
    """Statements and ``COMMIT``s per step or run between two counter reads, and the busiest statements."""
    if not after:
        return {}
    old = before.get("by_query", {})
    calls = {q: c - old.get(q, 0) for q, c in after["by_query"].items() if c - old.get(q, 0) > 0}
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:25]
    return {
        f"statements_per_{what}": (after["statements"] - before["statements"]) / n,
        f"commits_per_{what}": (after["commits"] - before["commits"]) / n,
        "statements": [[" ".join(q.split())[:160], round(c / n, 3)] for q, c in top],
    }


def serve(
    dsn: str, schema: str, *, concurrency: int = 100, lease: float = 10.0, name: str = "", **env: str
) -> subprocess.Popen[str]:
    """A worker process on the schema's queue; returns once it serves."""
    args = [sys.executable, "-m", "benchmarks.systems.durable_pg", "serve", dsn, schema]
    return spawn([*args, str(concurrency), str(lease), name], "serving", env)


async def _one(world: durable.World, wf: Any, i: int) -> float:
    t0 = time.perf_counter()
    h = durable.start_workflow(wf, i, world=world, queue=QUEUE)
    assert await h.result(timeout=120) == i
    return time.perf_counter() - t0


def latency(dsn: str, schema: str, n: int, pg: dict[str, Any]) -> dict[str, Any]:
    """Enqueue to result of ``n`` one-step runs one after another, a worker process already running."""
    with _world(dsn, schema) as world:
        procs = [serve(dsn, schema)]
        try:

            async def main() -> list[float]:
                for i in range(WARM):
                    await _one(world, one_step, -1 - i)
                return [await _one(world, one_step, i) for i in range(n)]

            lat = asyncio.run(main())
        finally:
            for p in procs:
                stop(p)
    return _summary(lat)


def throughput(
    dsn: str, schema: str, n: int, workers: int, concurrency: int, pg: dict[str, Any]
) -> dict[str, Any]:
    """``n`` I/O-bound runs (one call awaiting 50 ms) through ``workers`` worker processes.

    Timed from the first enqueue to the last result; each worker drives at
    most ``concurrency`` runs at once.
    """
    _trace("client")
    with _world(dsn, schema) as world:
        procs = [serve(dsn, schema, concurrency=concurrency, name=f"w{k}") for k in range(workers)]
        try:

            async def main() -> dict[str, Any]:
                for i in range(WARM):
                    await _one(world, io_run, -1 - i)
                await asyncio.sleep(0.3)  # the workers' start-up passes are behind them
                w0 = [cpu_seconds(p.pid) or 0.0 for p in procs]
                before = counters(pg["admin"], pg["db"])
                s0, c0, t0 = server_cpu(pg["pid"]), time.process_time(), time.perf_counter()
                handles = [durable.start_workflow(io_run, i, world=world, queue=QUEUE) for i in range(n)]
                for i, h in enumerate(handles):
                    assert await h.result(timeout=600) == i
                seconds, client = time.perf_counter() - t0, time.process_time() - c0
                server = server_cpu(pg["pid"]) - s0
                w1 = [cpu_seconds(p.pid) or 0.0 for p in procs]
                after = counters(pg["admin"], pg["db"])
                worker = sum(w1) - sum(w0)
                return {
                    "seconds": seconds,
                    "per_s": n / seconds,
                    "per_us": seconds / n * 1e6,
                    "worker_cpu_us": worker / n * 1e6,
                    "client_cpu_us": client / n * 1e6,
                    "server_cpu_us": server / n * 1e6,
                    "cpu_per_run_us": (worker + client + server) / n * 1e6,
                    **_per(before, after, n, "run"),
                }

            return asyncio.run(main())
        finally:
            for p in procs:
                stop(p)


def takeover(dsn: str, schema: str, n: int, lease: float, pg: dict[str, Any]) -> dict[str, Any]:
    """SIGKILL a worker driving ``n`` runs; time until another running worker has claimed them all."""
    marks = Path(pg["tmp"], f"held-{schema}")
    marks.mkdir()
    with _world(dsn, schema, lease=lease) as world:
        a = serve(dsn, schema, lease=lease, name="bench-a", BENCH_HOLD=str(marks))
        b = None
        try:
            ids = [durable.start_workflow(held, i, world=world, queue=QUEUE).run_id for i in range(n)]
            _until(lambda: len(list(marks.iterdir())) == n)
            b = serve(dsn, schema, lease=lease, name="bench-b")
            time.sleep(1.0)  # b is past its start-up recovery pass
            ctl = control_of(world)
            t0 = time.perf_counter()
            os.kill(a.pid, signal.SIGKILL)
            _until(lambda: all(r.owner == "bench-b" for r in ctl.records(ids).values()))
            adopted = time.perf_counter() - t0
            _until(lambda: all(world.log.info(r).status == "completed" for r in ids))  # type: ignore[union-attr]
            done = time.perf_counter() - t0
        finally:
            stop(a, signal.SIGKILL)
            if b is not None:
                stop(b)
    return {"seconds": done, "adopted_s": adopted, "per_us": adopted * 1e6, "lease_s": lease}


def _until(cond: Any, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the condition was not met in time")
        time.sleep(0.005)


def _serve_main(dsn: str, schema: str, concurrency: int, lease: float, name: str) -> None:
    _trace(f"worker-{name}")
    with _world(dsn, schema, lease=lease) as world:
        worker = durable.Worker(
            world, workflows=WORKFLOWS, queues=[QUEUE], concurrency=concurrency, name=name or None
        )
        print("serving", flush=True)
        asyncio.run(worker.run())


if __name__ == "__main__":
    from benchmarks.systems import durable_pg

    durable_pg._serve_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
