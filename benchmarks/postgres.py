"""The Postgres scenarios: durable's ``postgres_world`` beside a raw psycopg floor and DBOS, on one server.

``python -m benchmarks.postgres --smoke`` runs each scenario once at tiny
sizes; ``--full`` runs the sizes of the performance page. The harness starts
its own throwaway PostgreSQL server (``pg_server.py``: ``initdb`` into a
temporary folder, fsync on) and stops it at the end; each system writes to
a database of its own (``durable`` and ``floor`` with a schema per
measurement, one DBOS system database per measurement). As in ``python -m
benchmarks``, every measurement is a new process, the systems take turns and
figures are medians over the repeats.

- ``pa``: per-step cost of a trivial step in process: durable, the floor (one
  ~200-byte row ``INSERT`` + ``COMMIT`` per step on one connection), DBOS.
- ``pq``: queued dispatch, enqueue to result of a one-step run, a worker
  process already running.
- ``pi``: I/O-bound throughput, each run one call awaiting 50 ms, with 1, 2
  and 4 worker processes of 8 runs at once each; CPU per run split by
  workers, client and server, statements and commits per run.
- ``pk``: takeover: a worker driving runs is SIGKILLed; the time until a
  worker already running has claimed every one of them.
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import pg_server
from benchmarks.machine import describe
from benchmarks.run import Harness, Sizes, System, fmt, harness_main, ratio, row

DURABLE = System("durable (Postgres)", "durable_pg")
FLOOR = System("raw psycopg", "pg_floor")
DBOS = System("DBOS (Postgres)", "dbos_pg", {}, "dbos")
DBOS_DEFAULT = System("DBOS (poll 1 s, default)", "dbos_pg", {"poll": 1.0}, "dbos")
DBOS_FAST = System("DBOS (poll 10 ms)", "dbos_pg", {"poll": 0.01}, "dbos")
WORKERS = (1, 2, 4)
PER_WORKER = 8  # runs one worker drives at once: the bound of the I/O-bound scenario
LEASE = 2.0  # the takeover scenario's lease; the heartbeat is a third of it


@dataclass
class PostgresSizes:
    steps: int  # sequential steps of the per-step scenario
    latency: int  # runs one after another per dispatch measurement (durable, DBOS at 10 ms)
    latency_slow: int  # the same for DBOS at its default 1 s poll
    runs: int  # I/O-bound runs per throughput measurement
    held: int  # runs the killed worker drives
    repeats: int


SMOKE = PostgresSizes(steps=30, latency=5, latency_slow=2, runs=40, held=2, repeats=1)
FULL = PostgresSizes(steps=1000, latency=50, latency_slow=15, runs=480, held=10, repeats=3)


def worker_label(k: int) -> str:
    return f"pi {k} worker{'s' if k > 1 else ''}"


class PostgresHarness(Harness):
    """The harness of ``python -m benchmarks`` against a server it starts and stops."""

    def __init__(self, base: Path, sizes: PostgresSizes, peers: bool, verbose: bool):
        super().__init__(base, Sizes(0, 0, 0, 0, 0, 0, sizes.repeats), peers, verbose)
        self.pz = sizes
        self.timeout = 180 if sizes.runs < 100 else 1800
        self.server: pg_server.Server | None = None
        self.settings: dict[str, str] = {}
        self.skipped = pg_server.available()

    def systems(self, *candidates: System) -> list[System]:
        return [s for s in candidates if s.needs is None or (self.peers and s.available())]

    def target(self, system: System) -> dict[str, Any]:
        """A fresh database or schema of the system's own for one measurement."""
        assert self.server is not None
        self._n += 1
        schema = f"m{self._n:04d}"
        if system.module == "dbos_pg":
            db = f"dbos_{schema}"
            dsn = self.server.create_database(db)
        else:
            db = "durable" if system.module == "durable_pg" else "floor"
            dsn = self.server.dsn(db)
        pg = {
            "admin": self.server.dsn(),
            "pid": self.server.postmaster_pid(),
            "db": db,
            "tmp": str(self.base),
        }
        return {"dsn": dsn, "schema": schema, "pg": pg}

    def all(self) -> None:
        if self.skipped:
            return
        self.server = pg_server.start()
        try:
            self.settings = self.server.settings()
            for db in ("durable", "floor"):
                self.server.create_database(db)
            self.scenarios()
        finally:
            self.server.stop()

    def scenarios(self) -> None:
        z = self.pz
        self.measure(
            "pa",
            self.systems(DURABLE, FLOOR, DBOS),
            lambda s: self.worker(s, "seq", **self.target(s), n=z.steps),
        )
        self.measure(
            "pq",
            self.systems(DURABLE, DBOS_FAST, DBOS_DEFAULT),
            lambda s: self.worker(
                s, "latency", **self.target(s), n=z.latency_slow if s is DBOS_DEFAULT else z.latency
            ),
        )
        for k in WORKERS:
            self.measure(
                worker_label(k),
                [DURABLE],
                lambda s, k=k: self.worker(
                    s, "throughput", **self.target(s), n=z.runs * k, workers=k, concurrency=PER_WORKER
                ),
            )
        self.measure(
            "pk", [DURABLE], lambda s: self.worker(s, "takeover", **self.target(s), n=z.held, lease=LEASE)
        )


def med(h: Harness, scenario: str, system: str, key: str = "per_us") -> float | None:
    runs = h.figures.get((scenario, system))
    if not runs or key not in runs[0]:
        return None
    return statistics.median(r[key] for r in runs)


def spread(h: Harness, scenario: str, system: str, key: str = "per_us") -> str:
    vals = [r[key] for r in h.figures.get((scenario, system), []) if key in r]
    return f"{min(vals):.3g}–{max(vals):.3g}" if len(vals) > 1 else ""


EXTRA = (
    ("cpu_us", "client CPU µs / step", 0),
    ("server_cpu_us", "server CPU µs / step", 0),
    ("statements_per_step", "statements / step", 2),
    ("commits_per_step", "explicit COMMITs / step", 2),
)
EXTRA_RUN = (
    ("cpu_per_run_us", "CPU µs / run, workers + client + server", 0),
    ("worker_cpu_us", "worker CPU µs / run", 0),
    ("client_cpu_us", "client CPU µs / run", 0),
    ("server_cpu_us", "server CPU µs / run", 0),
    ("statements_per_run", "statements / run", 1),
    ("commits_per_run", "explicit COMMITs / run", 1),
)


def figures_table(h: Harness) -> list[str]:
    rows = [
        row("scenario", "system", "median", "unit", "min–max", "durable is"),
        "|---|---|---:|---|---|---:|",
    ]
    d = DURABLE.label
    extra: tuple[tuple[str, str, int], ...]
    for scenario, system in h.figures:
        if scenario == "pa":
            v = med(h, scenario, system)
            than = "" if system == d else fmt(ratio(v, med(h, scenario, d)), 2) + "× faster"
            rows.append(row(scenario, system, fmt(v), "µs / step", spread(h, scenario, system), than))
            extra = EXTRA
        elif scenario == "pq":
            v = med(h, scenario, system, "median_ms")
            than = "" if system == d else fmt(ratio(v, med(h, scenario, d, "median_ms")), 1) + "× faster"
            span = spread(h, scenario, system, "median_ms")
            rows.append(row(scenario, system, fmt(v, 2), "ms enqueue to result, median", span, than))
            p90 = med(h, scenario, system, "p90_ms")
            rows.append(
                row(scenario, system, fmt(p90, 2), "ms, p90", spread(h, scenario, system, "p90_ms"), "")
            )
            extra = ()
        elif scenario.startswith("pi"):
            v = med(h, scenario, system, "per_s")
            one = med(h, worker_label(1), system, "per_s")
            scale = "" if scenario == worker_label(1) else fmt(ratio(v, one), 2) + "× 1 worker"
            rows.append(
                row(scenario, system, fmt(v, 0), "runs / s", spread(h, scenario, system, "per_s"), scale)
            )
            extra = EXTRA_RUN
        else:
            extra = ()
            for key, what in (
                ("adopted_s", f"s until every run is claimed again (lease {LEASE:g} s)"),
                ("seconds", "s until every run completed"),
            ):
                v = med(h, scenario, system, key)
                rows.append(row(scenario, system, fmt(v, 3), what, spread(h, scenario, system, key), ""))
        for key, what, digits in extra:
            v = med(h, scenario, system, key)
            if v is not None:
                rows.append(row(scenario, system, fmt(v, digits), what, spread(h, scenario, system, key), ""))
    return rows


def targets_table(h: Harness) -> list[str]:
    rows = ["| scenario | target | measured | met |", "|---|---|---|:-:|"]

    def add(scenario: str, target: str, value: float | None, ok: bool, unit: str) -> None:
        met = "n/a" if value is None else ("yes" if ok else "**no**")
        rows.append(row(scenario, target, "n/a" if value is None else fmt(value, 2) + unit, met))

    d = DURABLE.label
    r = ratio(med(h, "pa", d), med(h, "pa", FLOOR.label))
    add("(pa)", "durable / raw psycopg autocommitted INSERT ≤ 2", r, r is not None and r <= 2, "×")
    r = ratio(med(h, "pa", DBOS.label), med(h, "pa", d))
    add("(pa)", "DBOS / durable ≥ 5", r, r is not None and r >= 5, "×")
    lat = med(h, "pq", d, "median_ms")
    add("(pq)", "durable median enqueue to result ≤ 10 ms", lat, lat is not None and lat <= 10, " ms")
    r = ratio(med(h, "pq", DBOS_DEFAULT.label, "median_ms"), lat)
    add("(pq)", f"{DBOS_DEFAULT.label} / durable ≥ 10", r, r is not None and r >= 10, "×")
    one = med(h, worker_label(1), d, "per_s")
    r = ratio(med(h, worker_label(2), d, "per_s"), one)
    add("(pi)", "2 workers / 1 worker throughput ≥ 1.8", r, r is not None and r >= 1.8, "×")
    r = ratio(med(h, worker_label(4), d, "per_s"), one)
    cores = os.cpu_count() or 1
    if cores >= 4:
        add("(pi)", "4 workers / 1 worker throughput ≥ 3", r, r is not None and r >= 3, "×")
    else:
        add("(pi)", f"4 workers / 1 worker throughput (≥ 3 applies on ≥ 4 cores; {cores} here)", r, True, "×")
    cpu = med(h, worker_label(2), d, "cpu_per_run_us")
    ms = None if cpu is None else cpu / 1000
    add("(pi)", "CPU per run, workers + client + server, ≤ 3 ms", ms, ms is not None and ms <= 3, " ms")
    took = med(h, "pk", d, "adopted_s")
    bound = LEASE + LEASE / 3
    add("(pk)", f"SIGKILL to every run claimed again ≤ lease + heartbeat ({bound:.2f} s)", took,
        took is not None and took <= bound, " s")  # fmt: skip
    return rows


def report(h: PostgresHarness, mode: str, data_dir: str, started: float) -> str:
    z = h.pz
    head = [
        f"# durable Postgres benchmarks ({mode})",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {time.time() - started:.0f} s, "
        f"{z.repeats} repeat(s), medians. Sizes: {z.steps} sequential steps, {z.latency} queued runs one "
        f"after another ({z.latency_slow} for DBOS at its default poll), {z.runs} I/O-bound runs per "
        f"worker ({PER_WORKER} at once per worker), {z.held} runs on the killed worker.",
        "",
    ]
    if h.skipped:
        return "\n".join([*head, f"Not measured: {h.skipped}.", ""])
    return "\n".join(
        [
            *head,
            "| machine | |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in describe(data_dir).items()),
            *(f"| PostgreSQL {k} | {v} |" for k, v in h.settings.items()),
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
    )


def main(argv: list[str] | None = None) -> int:
    """Run the Postgres scenarios and print the markdown report.

    ``--sql-trace DIR`` (beside the options of ``python -m benchmarks``) has the
    workers and the client of ``pi`` count their statements by caller into
    ``DIR`` (``sql_trace.py``); a traced run's timings are not figures.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "--sql-trace" in args:
        at = args.index("--sql-trace")
        if at + 1 >= len(args):
            raise SystemExit("--sql-trace needs a folder: python -m benchmarks.postgres --sql-trace DIR")
        folder = Path(args.pop(at + 1)).resolve()
        args.pop(at)
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["BENCH_SQL_TRACE"] = str(folder)
    return harness_main(
        args,
        prog="python -m benchmarks.postgres",
        description=(__doc__ or "").splitlines()[0],
        names=("postgres-full", "postgres-smoke"),
        sizes=(FULL, SMOKE),
        make=PostgresHarness,
        render=report,
        peers_help="durable and the psycopg floor only",
        only_example="pa,pq",
    )


if __name__ == "__main__":
    raise SystemExit(main())
