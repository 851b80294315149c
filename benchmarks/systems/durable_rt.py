"""durable's runtime: ``start_workflow``, a ``Queue`` served by ``little worker`` processes, recovery.

The measuring process is the client; the workers it starts are ``little
worker`` processes on the same data directory (``local_world``, the default
``"process"`` durability). Starting them, and a few warm-up runs, are not timed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import durable
from durable.runtime._driver import control_of

QUEUE = durable.Queue("bench")
ROOT = Path(__file__).resolve().parents[2]
TARGET = "benchmarks.systems.durable_rt:WORKFLOWS"
WARM = 5


@durable.step
async def trivial(i: int) -> int:
    return i


@durable.workflow
async def one_step(i: int) -> int:
    return await trivial(i)


@durable.step
async def hold(i: int) -> int:
    """Blocks in a worker started with ``BENCH_HOLD=<folder>`` (after marking the run there)."""
    folder = os.environ.get("BENCH_HOLD")
    if folder:
        os.close(os.open(os.path.join(folder, str(i)), os.O_CREAT | os.O_WRONLY, 0o644))
        await asyncio.sleep(3600)
    return i


@durable.workflow
async def held(i: int) -> int:
    return await hold(i)


WORKFLOWS = [one_step, held]


def serve(
    dir: str, *, queue: bool = True, name: str | None = None, durability: str = "process", **env: str
) -> subprocess.Popen[str]:
    """A worker process on ``dir``; returns once it says it serves.

    ``"process"`` durability runs ``little worker``; ``"power"`` (which the
    CLI has no flag for) runs ``Worker.run()`` in ``python -m
    benchmarks.systems.durable_rt DIR``, on ``local_world(dir, durability="power")``,
    with ``little worker``'s log handler (INFO records to stderr).
    """
    if durability == "process":
        args = [sys.executable, "-m", "durable.cli", "worker", TARGET, "--data-dir", dir]
        if queue:
            args += ["--queue", QUEUE.name]
        if name:
            args += ["--name", name]
    else:
        args = [sys.executable, "-m", "benchmarks.systems.durable_rt", dir, durability]
    return spawn(args, "little worker", env)


def spawn(args: list[str], ready: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start a worker process from the repository root; return once its first line says ``ready``."""
    p = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert p.stdout is not None
    if ready not in p.stdout.readline():
        p.kill()
        raise RuntimeError(f"the worker process did not start: {' '.join(args[:4])}")
    return p


def stop(p: subprocess.Popen[str], sig: int = signal.SIGTERM) -> None:
    """Signal a worker process, wait for it (killing it after 60 s), and close its pipe."""
    if p.poll() is None:
        p.send_signal(sig)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if p.stdout is not None:
        p.stdout.close()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process so far (Linux ``/proc``), or ``None``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _summary(lat: list[float]) -> dict[str, Any]:
    ms = sorted(x * 1e3 for x in lat)
    return {
        "median_ms": statistics.median(ms),
        "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))],
        "per_us": statistics.median(ms) * 1e3,
        "samples_ms": [round(x, 3) for x in ms],
    }


async def _one(world: durable.World, i: int, queued: bool) -> float:
    t0 = time.perf_counter()
    h = durable.start_workflow(one_step, i, world=world, queue=QUEUE if queued else None)
    out = await h.result(timeout=120)
    took = time.perf_counter() - t0
    assert out == i
    return took


def latency(dir: str, n: int, queued: bool, durability: str = "process") -> dict[str, Any]:
    """Start-to-result of ``n`` runs one after another, in process or through a worker process."""
    procs = [serve(dir, durability=durability)] if queued else []
    try:
        with durable.local_world(dir, durability=durability) as world:  # type: ignore[arg-type]

            async def main() -> list[float]:
                for i in range(WARM):
                    await _one(world, -1 - i, queued)
                return [await _one(world, i, queued) for i in range(n)]

            lat = asyncio.run(main())
    finally:
        for p in procs:
            stop(p)
    return _summary(lat)


def throughput(dir: str, n: int, workers: int, durability: str = "process") -> dict[str, Any]:
    """``n`` queued runs served by ``workers`` worker processes: first enqueue to last result."""
    procs = [serve(dir, durability=durability) for _ in range(workers)]
    try:
        with durable.local_world(dir, durability=durability) as world:  # type: ignore[arg-type]

            async def main() -> tuple[float, float]:
                for i in range(WARM):
                    await _one(world, -1 - i, True)
                before = [cpu_seconds(p.pid) or 0.0 for p in procs]
                t0 = time.perf_counter()
                handles = [durable.start_workflow(one_step, i, world=world, queue=QUEUE) for i in range(n)]
                for i, h in enumerate(handles):
                    assert await h.result(timeout=600) == i
                seconds = time.perf_counter() - t0
                after = [cpu_seconds(p.pid) or 0.0 for p in procs]
                return seconds, sum(after) - sum(before)

            seconds, worker_cpu = asyncio.run(main())
    finally:
        for p in procs:
            stop(p)
    per = seconds / n * 1e6
    return {"seconds": seconds, "per_s": n / seconds, "per_us": per, "worker_cpu_us": worker_cpu / n * 1e6}


def recovery(dir: str, n: int) -> dict[str, Any]:
    """SIGKILL a worker that drives ``n`` runs; time until a running worker drives them again."""
    marks = Path(dir, "held")
    marks.mkdir()
    a = serve(dir, BENCH_HOLD=str(marks))
    b = None
    try:
        with durable.local_world(dir) as world:
            ids = [durable.start_workflow(held, i, world=world, queue=QUEUE).run_id for i in range(n)]
            _until(lambda: len(list(marks.iterdir())) == n)
            b = serve(dir, queue=False, name="bench-b")  # recovery only: it claims nothing
            time.sleep(1.0)  # b is past its start-up recovery pass, in its steady loop
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
    return {"seconds": done, "adopted_s": adopted, "per_us": done * 1e6}


def _until(cond: Any, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the runs were not driven again in time")
        time.sleep(0.001)


def _serve_main(dir: str, durability: str) -> None:
    """``Worker.run()`` on the queue, as ``little worker`` does, with the given durability.

    Its records go to stderr as ``little worker``'s do (INFO and above), so that
    the two durabilities differ in nothing else.
    """
    from durable.cli._runtime import show_logs

    show_logs()
    with durable.local_world(dir, durability=durability) as world:  # type: ignore[arg-type]
        worker = durable.Worker(world, workflows=WORKFLOWS, queues=[QUEUE])
        print(f"little worker {worker.name}: serving", flush=True)
        asyncio.run(worker.run())


if __name__ == "__main__":
    # The workflows of the named module, so that their recorded names match the client's.
    from benchmarks.systems import durable_rt

    durable_rt._serve_main(sys.argv[1], sys.argv[2])
