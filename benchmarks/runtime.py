"""The runtime benchmarks: start-to-result latency, queue throughput, recovery after SIGKILL.

``python -m benchmarks.runtime --smoke`` runs each scenario once at tiny
sizes (the test suite runs it); ``--full`` runs the sizes of the performance
page. As in ``python -m benchmarks``, each measurement is a new process
(``benchmarks.worker``), which starts the worker processes it measures
against; the systems take turns in a rotating order; figures are medians
over the repeats with their range.

- ``h``: start-to-result latency of a one-step workflow, one run after
  another: in process (durable ``start_workflow`` + ``await
  handle.result()``, DBOS ``DBOS.start_workflow`` + ``get_result()``) and
  through a queue served by a worker in another process (``little worker``;
  a DBOS process, the client enqueueing with ``DBOSClient``).
- ``i``: throughput of queued one-step runs with one and with two worker
  processes, from the first enqueue to the last result.
- ``j``: recovery: a worker driving runs is SIGKILLed; the time until a
  worker that was already running drives every one of them again.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.machine import describe
from benchmarks.run import Harness, Sizes, System, fmt, harness_main, ratio, row

DURABLE = System("durable", "durable_rt")
DURABLE_POWER = System("durable (power)", "durable_rt", {"durability": "power"})
DBOS_DEFAULT = System("DBOS (poll 1 s, default)", "dbos_rt", {"poll": 1.0}, "dbos")
DBOS_FAST = System("DBOS (poll 10 ms)", "dbos_rt", {"poll": 0.01}, "dbos")
DBOS_INPROC = System("DBOS", "dbos_rt", {}, "dbos")


@dataclass
class RuntimeSizes:
    latency: int  # runs one after another per measurement
    runs: int  # queued runs of the throughput scenario
    held: int  # runs the killed worker drives
    repeats: int


SMOKE = RuntimeSizes(latency=5, runs=20, held=3, repeats=1)
FULL = RuntimeSizes(latency=50, runs=2000, held=50, repeats=5)


class RuntimeHarness(Harness):
    """The harness of ``python -m benchmarks``, with the runtime's scenarios."""

    def __init__(self, base: Path, sizes: RuntimeSizes, peers: bool, verbose: bool):
        super().__init__(base, Sizes(0, 0, 0, 0, 0, 0, sizes.repeats), peers, verbose)
        self.rt = sizes
        self.timeout = 120 if sizes.runs < 100 else 1800

    def systems(self, *candidates: System) -> list[System]:
        return [s for s in candidates if s.needs is None or (self.peers and s.available())]

    def all(self) -> None:
        z = self.rt
        # In process: DBOS's poll interval plays no part (the handle waits on the run's future).
        self.measure(
            "h in-process",
            self.systems(DURABLE, DBOS_INPROC),
            lambda s: self.worker(s, "latency", dir=self.fresh_dir(), n=z.latency, queued=False),
        )
        queued = self.systems(DURABLE, DURABLE_POWER, DBOS_DEFAULT, DBOS_FAST)
        self.measure(
            "h queue",
            queued,
            lambda s: self.worker(s, "latency", dir=self.fresh_dir(), n=z.latency, queued=True),
        )
        for k in (1, 2):
            self.measure(
                f"i {k} worker{'s' if k > 1 else ''}",
                queued,
                lambda s, k=k: self.worker(s, "throughput", dir=self.fresh_dir(), n=z.runs, workers=k),
            )
        self.measure("j", [DURABLE], lambda s: self.worker(s, "recovery", dir=self.fresh_dir(), n=z.held))


def med(h: Harness, scenario: str, system: str, key: str) -> float | None:
    runs = h.figures.get((scenario, system))
    if not runs or key not in runs[0]:
        return None
    return statistics.median(r[key] for r in runs)


def spread(h: Harness, scenario: str, system: str, key: str) -> str:
    vals = [r[key] for r in h.figures.get((scenario, system), []) if key in r]
    return f"{min(vals):.3g}–{max(vals):.3g}" if len(vals) > 1 else ""


def figures_table(h: Harness) -> list[str]:
    rows = [
        row("scenario", "system", "median", "p90", "unit", "min–max of medians", "durable is"),
        "|---|---|---:|---:|---|---|---:|",
    ]
    for scenario, system in h.figures:
        if scenario.startswith("h"):
            v, d = med(h, scenario, system, "median_ms"), med(h, scenario, DURABLE.label, "median_ms")
            p90 = fmt(med(h, scenario, system, "p90_ms"), 2)
            than = "" if system == DURABLE.label else fmt(ratio(v, d), 1) + "× faster"
            span = spread(h, scenario, system, "median_ms")
            rows.append(row(scenario, system, fmt(v, 2), p90, "ms start to result", span, than))
        elif scenario.startswith("i"):
            v, d = med(h, scenario, system, "per_s"), med(h, scenario, DURABLE.label, "per_s")
            than = "" if system == DURABLE.label else fmt(ratio(d, v), 1) + "× the throughput"
            span = spread(h, scenario, system, "per_s")
            rows.append(row(scenario, system, fmt(v, 0), "", "runs / s", span, than))
            cpu = med(h, scenario, system, "worker_cpu_us")
            if cpu is not None:
                rows.append(row(scenario, system, fmt(cpu, 0), "", "worker CPU µs / run", "", ""))
        else:
            for key, what in (
                ("adopted_s", "s until every run is claimed again"),
                ("seconds", "s until every run completed"),
            ):
                v = med(h, scenario, system, key)
                rows.append(row(scenario, system, fmt(v, 3), "", what, spread(h, scenario, system, key), ""))
    return rows


def targets_table(h: Harness) -> list[str]:
    rows = ["| scenario | target | measured | met |", "|---|---|---|:-:|"]

    def add(scenario: str, target: str, value: float | None, ok: bool, unit: str) -> None:
        met = "n/a" if value is None else ("yes" if ok else "**no**")
        rows.append(row(scenario, target, "n/a" if value is None else fmt(value, 2) + unit, met))

    d = DURABLE.label
    lat = med(h, "h queue", d, "median_ms")
    r = ratio(med(h, "h queue", DBOS_DEFAULT.label, "median_ms"), lat)
    add("(h) queue", f"{DBOS_DEFAULT.label} / durable median latency ≥ 10", r, r is not None and r >= 10, "×")
    add("(h) queue", "durable median latency < 5 ms", lat, lat is not None and lat < 5, " ms")
    for k in ("i 1 worker", "i 2 workers"):
        for system in (d, DURABLE_POWER.label):
            r = ratio(med(h, k, system, "per_s"), med(h, k, DBOS_DEFAULT.label, "per_s"))
            target = f"{system} / {DBOS_DEFAULT.label} throughput ≥ 20"
            add(f"({k})", target, r, r is not None and r >= 20, "×")
    rec = med(h, "j", d, "seconds")
    add("(j)", "SIGKILL to every run driven again (completed) < 1 s", rec, rec is not None and rec < 1, " s")
    return rows


def report(h: RuntimeHarness, mode: str, data_dir: str, started: float) -> str:
    z = h.rt
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    lines = [
        f"# durable runtime benchmarks ({mode})",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {time.time() - started:.0f} s, "
        f"{z.repeats} repeat(s), medians. Sizes: {z.latency} runs one after another per latency "
        f"measurement, {z.runs:,} queued runs per throughput measurement, {z.held} runs on the killed "
        f"worker. Load average at the end: {load}.",
        "",
        'durable: `local_world` on the directory below, durability `"process"` (no fsync per '
        "commit) unless the row says `power` (one fsync per commit of the event log); workers are "
        "`little worker` processes (`power`: `Worker.run()` in a python process). DBOS: its SQLite "
        "system database in the same directory, set to WAL, SQLite's default `synchronous` "
        "(FULL: an fsync per commit); the queue's `polling_interval_sec` is DBOS's default "
        "1 s, or 10 ms where the row says so; every DBOS handle waits with "
        "`get_result(polling_interval_sec=0.001)`.",
        "",
        "| machine | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in describe(data_dir).items()),
        "",
        "## Targets",
        "",
        *targets_table(h),
        "",
        "## Figures",
        "",
        *figures_table(h),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the runtime scenarios and print the markdown report."""
    return harness_main(
        argv,
        prog="python -m benchmarks.runtime",
        description=(__doc__ or "").splitlines()[0],
        names=("runtime-full", "runtime-smoke"),
        sizes=(FULL, SMOKE),
        make=RuntimeHarness,
        render=report,
        peers_help="durable only",
        only_example="h,j",
    )


if __name__ == "__main__":
    raise SystemExit(main())
