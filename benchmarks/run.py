"""The benchmark harness: every scenario, every system, medians, ratios, targets.

``python -m benchmarks --smoke`` runs each scenario once at tiny sizes (the
test suite runs it so the harness never rots); ``python -m benchmarks --full``
runs the sizes of the performance page with several repeats. Each
measurement runs in its own process (see ``worker.py``); within a scenario
the systems take turns, in a rotating order, so that a slow spell of the
machine hits all of them alike. Figures are medians over the repeats.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.machine import describe

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class System:
    label: str
    module: str
    extra: dict[str, Any] = field(default_factory=dict)
    needs: str | None = None  # an importable module, for peers

    def available(self) -> bool:
        return self.needs is None or importlib.util.find_spec(self.needs) is not None


DURABLE = System("durable", "durable_sys")
DURABLE_CODEC = System("durable + codec", "durable_sys", {"codec": True}, "cryptography")
FLOOR = System("raw SQLite", "floor")
DBOS_WAL = System("DBOS (WAL)", "dbos_sys", {"journal": "wal"}, "dbos")
DBOS_DEFAULT = System("DBOS (default journal)", "dbos_sys", {"journal": "default"}, "dbos")
LANGGRAPH = System("LangGraph", "langgraph_sys", {}, "langgraph.checkpoint.sqlite")
PEERS = (DBOS_WAL, DBOS_DEFAULT, LANGGRAPH)


@dataclass
class Sizes:
    steps: int
    fanout: int
    big: int
    others: int
    kill_at: int
    outside: int
    repeats: int


SMOKE = Sizes(steps=30, fanout=30, big=300, others=20, kill_at=27, outside=20_000, repeats=1)
FULL = Sizes(steps=1000, fanout=1000, big=100_000, others=10_000, kill_at=900, outside=300_000, repeats=5)


class Harness:
    """Runs the measurements and keeps every repeat's figures."""

    def __init__(self, base: Path, sizes: Sizes, peers: bool, verbose: bool):
        self.base = base
        self.sizes = sizes
        self.peers = peers
        self.verbose = verbose
        self.figures: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._n = 0
        self.only: set[str] = set()
        self.timeout = 60 if sizes.repeats == 1 and sizes.steps < 100 else 1800

    def fresh_dir(self) -> str:
        self._n += 1
        path = self.base / f"m{self._n:04d}"
        path.mkdir()
        return str(path)

    def worker(self, system: System, op: str, **args: Any) -> dict[str, Any]:
        job = {"module": system.module, "op": op, "args": {**system.extra, **args}}
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.worker", json.dumps(job)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
            timeout=self.timeout,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{system.label} {op} {args} failed:\n{proc.stderr[-3000:]}")
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        return json.loads(lines[-1]) if lines else {}

    def systems(self, *candidates: System) -> list[System]:
        return [s for s in candidates if s in (DURABLE, FLOOR) or (self.peers and s.available())]

    def measure(self, scenario: str, systems: list[System], run: Callable[[System], dict[str, Any]]) -> None:
        """Run every system ``repeats`` times, rotating the order each round."""
        if self.only and scenario.split()[0] not in self.only:
            return
        for r in range(self.sizes.repeats):
            k = r % len(systems)
            for system in systems[k:] + systems[:k]:
                t0 = time.perf_counter()
                result = run(system)
                self.figures.setdefault((scenario, system.label), []).append(result)
                if self.verbose:
                    took = time.perf_counter() - t0
                    per = result.get("per_us", 0)
                    line = f"  {scenario:<12} {system.label:<24} {per:10.1f} µs  ({took:.1f} s)"
                    print(line, file=sys.stderr)

    # -- scenarios -------------------------------------------------------------

    def seq(self, scenario: str, durability: str, tool: bool, systems: list[System]) -> None:
        n = self.sizes.steps
        self.measure(
            scenario,
            systems,
            lambda s: self.worker(s, "seq", dir=self.fresh_dir(), n=n, durability=durability, tool=tool),
        )

    def resume(self, scenario: str, n: int, kill_at: int | None, others: int, systems: list[System]) -> None:
        if self.only and scenario.split()[0] not in self.only:
            return
        built: dict[str, str] = {}

        def run_copy(s: System, src: str) -> dict[str, Any]:
            d = self.fresh_dir()
            shutil.rmtree(d)
            shutil.copytree(src, d)  # every repeat resumes the same crashed run
            return self.worker(s, "resume", dir=d, n=n)

        for s in systems:
            for attempt in range(3):
                d = self.fresh_dir()
                self.worker(s, "build", dir=d, n=n, kill_at=kill_at, others=others)
                try:
                    # One unmeasured resume checks the crash left a resumable run: a kill
                    # can land before a peer's background writer commits its checkpoint.
                    run_copy(s, d)
                except RuntimeError:
                    if attempt == 2:
                        raise
                    continue
                built[s.label] = d
                break

        def run(s: System) -> dict[str, Any]:
            return run_copy(s, built[s.label])

        self.measure(scenario, systems, run)

    def all(self) -> None:
        z = self.sizes
        peers_a = self.systems(DURABLE, FLOOR, DBOS_WAL, DBOS_DEFAULT, LANGGRAPH)
        self.seq("a process", "process", False, peers_a)
        self.seq("a power", "power", False, [DURABLE, FLOOR])
        self.seq("b process", "process", True, [DURABLE, FLOOR])
        self.seq("b power", "power", True, [DURABLE, FLOOR])
        resumers = self.systems(DURABLE, DBOS_WAL, LANGGRAPH)
        # The fixed cost of a resume (open the log, check drift, finish): a run
        # with no steps. Subtracted, it leaves the cost per replayed step.
        self.resume("c empty", 0, 0, 0, resumers)
        self.resume("c completed", z.steps, None, 0, self.systems(DURABLE, DBOS_WAL))
        self.resume("c replay", z.steps, z.steps, 0, resumers)
        self.resume("c killed", z.steps, z.kill_at, 0, resumers)
        self.measure(
            "d power",
            self.systems(DURABLE, LANGGRAPH),
            lambda s: self.worker(s, "fanout", dir=self.fresh_dir(), n=z.fanout, durability="power"),
        )
        self.resume("e small", z.steps, z.steps, 0, [DURABLE])
        self.resume("e big", z.big, z.big, 0, [DURABLE])
        self.resume("e big+others", z.big, z.big, z.others, [DURABLE])
        self.measure("g", [DURABLE], lambda s: self.worker(s, "outside", n=z.outside))
        # The codec's cost: the same (a) and (b) runs with every payload encrypted.
        if DURABLE_CODEC.available():
            self.seq("h a", "process", False, [DURABLE, DURABLE_CODEC])
            self.seq("h b", "process", True, [DURABLE, DURABLE_CODEC])
            self.resume("h replay", z.steps, z.steps, 0, [DURABLE, DURABLE_CODEC])


# -- reporting ------------------------------------------------------------------


def med(h: Harness, scenario: str, system: str, key: str = "per_us") -> float | None:
    runs = h.figures.get((scenario, system))
    if not runs or key not in runs[0]:
        return None
    return statistics.median(r[key] for r in runs)


def spread(h: Harness, scenario: str, system: str, key: str = "per_us") -> str:
    runs = h.figures.get((scenario, system), [])
    vals = [r[key] for r in runs if key in r]
    if len(vals) < 2:
        return ""
    return f"{min(vals):.3g}–{max(vals):.3g}"


def marginal(h: Harness, scenario: str, system: str, n: int) -> float | None:
    """µs per replayed step: the resume's median time above an empty run's, over ``n``."""
    total, empty = med(h, scenario, system, "seconds"), med(h, "c empty", system, "seconds")
    if total is None or empty is None or n == 0:
        return None
    return (total - empty) / n * 1e6


def fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


UNITS = {
    "a": "µs / step",
    "b": "µs / step",
    "c": "µs / step",
    "d": "µs / branch",
    "e": "µs / step",
    "g": "µs / call above plain",
    "h": "µs / step",
}


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def figures_table(h: Harness) -> list[str]:
    """Every median, its spread over the repeats and its ratio to durable's figure."""
    rows = [
        row("scenario", "system", "median", "unit", "min–max", "ratio to durable"),
        "|---|---|---:|---|---|---:|",
    ]
    extra = []
    for scenario, system in h.figures:
        v, d = med(h, scenario, system), med(h, scenario, "durable")
        r = "" if system == "durable" else fmt(ratio(v, d), 2) + "×"
        digits = 2 if scenario == "g" else 1
        unit = "µs (the whole resume)" if scenario == "c empty" else UNITS[scenario[0]]
        rows.append(row(scenario, system, fmt(v, digits), unit, spread(h, scenario, system), r))
        first = h.figures[(scenario, system)][0]
        if "bytes_per_step" in first and scenario == "a process":
            b, bd = (
                med(h, scenario, system, "bytes_per_step"),
                med(h, scenario, "durable", "bytes_per_step"),
            )
            sp = spread(h, scenario, system, "bytes_per_step")
            extra.append(row("f", system, fmt(b, 0), "bytes / step", sp, fmt(ratio(b, bd), 2) + "×"))
        if "peak_mb" in first:
            unit = f"peak RSS MB (at start {fmt(med(h, scenario, system, 'base_mb'))})"
            peak = fmt(med(h, scenario, system, "peak_mb"))
            extra.append(row(scenario, system, peak, unit, spread(h, scenario, system, "peak_mb"), ""))
        n = {"c replay": h.sizes.steps, "e small": h.sizes.steps, "e big": h.sizes.big, "h replay": 0}.get(
            scenario, h.sizes.big if scenario == "e big+others" else 0
        )
        m = marginal(h, scenario, system, n)
        if m is not None:
            r = "" if system == "durable" else fmt(ratio(m, marginal(h, scenario, "durable", n)), 2) + "×"
            extra.append(row(scenario, system, fmt(m, 2), "µs / step above an empty resume", "", r))
        if "cpu_us" in first:
            extra.append(
                row(
                    scenario,
                    system,
                    fmt(med(h, scenario, system, "cpu_us")),
                    "CPU µs / step",
                    spread(h, scenario, system, "cpu_us"),
                    "",
                )
            )
        if "plain_per_us" in first and scenario == "c replay":
            plain = fmt(med(h, scenario, system, "plain_per_us"), 2)
            extra.append(row(scenario, "plain function calls", plain, "µs / step", "", ""))
        if "async_per_us" in first:
            a = fmt(med(h, scenario, system, "async_per_us"), 2)
            extra.append(row("g async", system, a, "µs / call above plain", "", ""))
    return rows + extra


def targets_table(h: Harness) -> list[str]:
    rows = ["| scenario | target | measured | met |", "|---|---|---|:-:|"]

    def add(
        scenario: str,
        target: str,
        value: float | None,
        ok: Callable[[float], bool],
        unit: str = "×",
    ) -> None:
        met = "n/a" if value is None else ("yes" if ok(value) else "**no**")
        shown = "n/a" if value is None else fmt(value, 2) + unit
        rows.append(row(scenario, target, shown, met))

    dur = "durable"
    add(
        "(a) process",
        "durable / raw NORMAL commit ≤ 1.8",
        ratio(med(h, "a process", dur), med(h, "a process", FLOOR.label)),
        lambda v: v <= 1.8,
    )
    for peer in (DBOS_WAL.label, LANGGRAPH.label):
        add(
            "(a) process",
            f"{peer} / durable ≥ 15",
            ratio(med(h, "a process", peer), med(h, "a process", dur)),
            lambda v: v >= 15,
        )
    add(
        "(a) power",
        "durable / raw FULL commit ≤ 1.5",
        ratio(med(h, "a power", dur), med(h, "a power", FLOOR.label)),
        lambda v: v <= 1.5,
    )
    add(
        "(a) power",
        f"{DBOS_WAL.label} / durable ≥ 3",
        ratio(med(h, "a process", DBOS_WAL.label), med(h, "a power", dur)),
        lambda v: v >= 3,
    )
    add(
        "(b) power",
        "durable / raw FULL commit ≤ 2.5",
        ratio(med(h, "b power", dur), med(h, "b power", FLOOR.label)),
        lambda v: v <= 2.5,
    )
    replay = marginal(h, "c replay", dur, h.sizes.steps)
    plain = med(h, "c replay", dur, "plain_per_us")
    add(
        "(c)",
        "replay per step (above an empty resume) − plain calls ≤ 4 µs",
        None if replay is None or plain is None else replay - plain,
        lambda v: v <= 4,
        " µs",
    )
    for peer, least in ((DBOS_WAL.label, 40), (LANGGRAPH.label, 50)):
        add(
            "(c)",
            f"{peer} replay / durable replay ≥ {least}",
            ratio(marginal(h, "c replay", peer, h.sizes.steps), replay),
            lambda v, least=least: v >= least,  # type: ignore[misc]
        )
    fan = h.figures.get(("d power", dur))
    floor_full = med(h, "a power", FLOOR.label)
    if fan and floor_full:
        events_per_branch = statistics.median(r["events"] for r in fan) / h.sizes.fanout
        alone = floor_full * events_per_branch  # every event its own FULL commit
        add(
            "(d) power",
            "throughput / one commit per event ≥ 5",
            ratio(alone, med(h, "d power", dur)),
            lambda v: v >= 5,
        )
    z = h.sizes
    per = [
        marginal(h, "e small", dur, z.steps),
        marginal(h, "e big", dur, z.big),
        marginal(h, "e big+others", dur, z.big),
    ]
    known = [p for p in per if p is not None and p > 0]
    add(
        "(e)",
        "resume per step (above an empty resume), max / min over sizes ≤ 1.5",
        max(known) / min(known) if len(known) == len(per) else None,
        lambda v: v <= 1.5,
    )
    add(
        "(e)",
        "peak memory of the big resume < 150 MB",
        med(h, "e big+others", dur, "peak_mb"),
        lambda v: v < 150,
        " MB",
    )
    add(
        "(f)",
        "≤ 300 bytes per trivial step",
        med(h, "a process", dur, "bytes_per_step"),
        lambda v: v <= 300,
        " B",
    )
    add("(g)", "≤ 1 µs per call above undecorated", med(h, "g", dur), lambda v: v <= 1, " µs")
    for kind in ("a", "b"):
        add(
            f"(h) {kind} process",
            "durable with codec= / without ≤ 1.3",
            ratio(med(h, f"h {kind}", DURABLE_CODEC.label), med(h, f"h {kind}", dur)),
            lambda v: v <= 1.3,
        )
    return rows


def report(h: Harness, mode: str, data_dir: str, started: float) -> str:
    z = h.sizes
    lines = [
        f"# durable benchmarks ({mode})",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {time.time() - started:.0f} s, "
        f"{z.repeats} repeat(s), medians. Sizes: {z.steps} sequential steps, {z.fanout} branches, "
        f"a {z.big:,}-step run with {z.others:,} other runs, killed at step {z.kill_at}.",
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
    """Run the harness and print the markdown report."""
    return harness_main(
        argv,
        prog="python -m benchmarks",
        description=__doc__.splitlines()[0],
        names=("full", "smoke"),
        sizes=(FULL, SMOKE),
        make=Harness,
        render=report,
        peers_help="durable and the raw-SQLite floor only",
        only_example="a,c",
    )


def harness_main(
    argv: list[str] | None,
    *,
    prog: str,
    description: str,
    names: tuple[str, str],
    sizes: tuple[Any, Any],
    make: Any,
    render: Any,
    peers_help: str,
    only_example: str,
) -> int:
    """The command line of a harness: parse, run every scenario, write the report and its JSON."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat (the default)")
    mode.add_argument("--full", action="store_true", help="the sizes of the performance page")
    parser.add_argument("--repeats", type=int, help="repeats per figure (median taken)")
    parser.add_argument("--no-peers", action="store_true", help=peers_help)
    parser.add_argument("--dir", help="where the data directories go (its file system matters)")
    parser.add_argument(
        "--out", default=str(RESULTS), help="folder for the report (default benchmarks/results)"
    )
    parser.add_argument("--only", help=f"comma-separated scenario ids to run, e.g. {only_example}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    name = names[0] if args.full else names[1]
    chosen = sizes[0] if args.full else sizes[1]
    if args.repeats:
        chosen.repeats = args.repeats
    text, _ = run_harness(
        make, chosen, name, render, peers=not args.no_peers, verbose=not args.quiet,
        only=args.only, dir=args.dir, out=Path(args.out),
    )  # fmt: skip
    print(text)
    return 0


def run_harness(
    make: Any,
    sizes: Any,
    name: str,
    render: Any,
    *,
    peers: bool,
    verbose: bool,
    only: str | None,
    dir: str | None,
    out: Path,
) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """Run every scenario of a harness; write ``<stamp>-<name>.md`` and ``.json`` into ``out``."""
    started = time.time()
    base = Path(tempfile.mkdtemp(prefix="durable-bench-", dir=dir))
    try:
        h = make(base, sizes, peers=peers, verbose=verbose)
        h.only = set(only.split(",")) if only else set()
        h.all()
        text = render(h, name, str(base), started)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    figures = {f"{k[0]} | {k[1]}": v for k, v in h.figures.items()}
    (out / f"{stamp}-{name}.md").write_text(text)
    (out / f"{stamp}-{name}.json").write_text(json.dumps(figures, indent=1))
    return text, figures
