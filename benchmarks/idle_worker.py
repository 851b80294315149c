"""What an idle worker costs while other runs end in its data directory.

Run from the repository root::

    python -m benchmarks.idle_worker [RUNS] [--rounds N]

A ``little worker`` serves a queue that nothing is enqueued on, while this
process drives RUNS one-step runs of its own, one after another
(``start_workflow`` without a queue, then ``result()``). Every run's end
rings the data directory's doorbell. The worker should sleep through them:
it claims on new work only. The script prints, per run of this process, the
CPU the idle worker spent (``/proc``) and the wall time of the runs, beside
the same runs with no worker at all, taking turns over the rounds so that a
slow spell of the machine falls on both alike; figures are medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import durable
from benchmarks.systems.durable_rt import WARM, cpu_seconds, one_step, serve, stop


def _runs(dir: str, n: int, worker: bool) -> dict[str, float]:
    """``n`` in-process runs on ``dir``, with an idle worker beside them or not."""
    proc = serve(dir) if worker else None
    try:
        with durable.local_world(dir) as world:

            async def main() -> tuple[float, float]:
                for i in range(WARM):
                    assert await durable.start_workflow(one_step, -1 - i, world=world).result() == -1 - i
                before = 0.0 if proc is None else cpu_seconds(proc.pid) or 0.0
                t0 = time.perf_counter()
                for i in range(n):
                    assert await durable.start_workflow(one_step, i, world=world).result() == i
                seconds = time.perf_counter() - t0
                after = 0.0 if proc is None else cpu_seconds(proc.pid) or 0.0
                return seconds, after - before

            seconds, idle_cpu = asyncio.run(main())
    finally:
        if proc is not None:
            stop(proc)
    return {"wall_us": seconds / n * 1e6, "idle_cpu_us": idle_cpu / n * 1e6}


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("runs", nargs="?", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    seen: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for r in range(args.rounds):
        for worker in (True, False) if r % 2 == 0 else (False, True):
            with tempfile.TemporaryDirectory(prefix="durable-idle-") as dir:
                seen[worker].append(_runs(dir, args.runs, worker))

    def med(worker: bool, field: str) -> float:
        return statistics.median(x[field] for x in seen[worker])

    print(f"{args.runs} one-step runs in this process, median of {args.rounds} rounds\n")
    print("| figure | value |\n|---|---:|")
    print(f"| wall µs per run, no worker | {med(False, 'wall_us'):.0f} |")
    print(f"| wall µs per run, an idle worker beside | {med(True, 'wall_us'):.0f} |")
    print(f"| the idle worker's CPU µs per run | {med(True, 'idle_cpu_us'):.1f} |")


if __name__ == "__main__":
    main()
