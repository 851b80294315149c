"""How far the machine's speed drifts between fresh processes: the noise under every figure.

Run from the repository root::

    python -m benchmarks.drift [PROCESSES] [--steps N]

In PROCESSES rounds, each in fresh processes taking turns, it times a fixed
pure-Python loop (dictionary writes and reads, CPU time), durable's trivial
step of scenario (a) process and the raw SQLite floor's commit (both
through ``python -m benchmarks.worker``, as the harness measures them). It
prints each one's fastest, median and slowest round and the ratio of the
slowest to the fastest. Nothing here changes between rounds but the
process: the spread is the machine's, and it bounds how far apart two runs
of the page can land.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import run

LOOP = 300_000


def spin(n: int = LOOP) -> float:
    """Milliseconds of CPU time a fixed loop of dictionary writes and reads takes in this process."""
    t0 = time.process_time()
    d: dict[str, int] = {}
    for i in range(n):
        d[str(i)] = i
        d.get(str(i - 1))
    return (time.process_time() - t0) * 1e3


def _spin_in_fresh_process() -> float:
    proc = subprocess.run(
        [sys.executable, "-c", "from benchmarks.drift import spin; print(spin())"],
        cwd=run.ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(proc.stdout.split()[-1])


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("processes", nargs="?", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000, help="steps per durable and floor measurement")
    args = ap.parse_args(argv)
    seen: dict[str, list[float]] = {"loop": [], "durable": [], "floor": []}
    with tempfile.TemporaryDirectory(prefix="durable-drift-") as base:
        harness = run.Harness(Path(base), run.FULL, False, False)

        def step(system: run.System) -> float:
            return float(
                harness.worker(
                    system, "seq", dir=harness.fresh_dir(), n=args.steps, durability="process", tool=False
                )["per_us"]
            )

        for _ in range(args.processes):
            seen["loop"].append(_spin_in_fresh_process())
            seen["durable"].append(step(run.DURABLE))
            seen["floor"].append(step(run.FLOOR))
    units = {
        "loop": f"ms of CPU, a pure-Python loop of {LOOP:,} rounds",
        "durable": "µs / step, durable (a) process",
        "floor": "µs / step, raw SQLite commit",
    }
    print(f"{args.processes} fresh processes of each, taking turns\n")
    print("| measure | fastest | median | slowest | slowest / fastest |\n|---|---:|---:|---:|---:|")
    for name, values in seen.items():
        lo, mid, hi = min(values), statistics.median(values), max(values)
        print(f"| {units[name]} | {lo:.1f} | {mid:.1f} | {hi:.1f} | {hi / lo:.2f}× |")


if __name__ == "__main__":
    main()
