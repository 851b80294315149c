"""The simulator's soak: as many seeds as time allows, seeds per second and steps explored, findings shrunk.

Each seed generates a workflow from the grammar of every kind of call and
control, runs it through the real runtime on a virtual clock under the
faults and decisions the seed draws, and checks every invariant after every
action (``durable.testing.simulate``). The first finding of each kind is
shrunk and printed as a pytest test into ``--out``.

Run it from the repository root:

    python -m benchmarks.simulate --seeds 10000
    python -m benchmarks.simulate --minutes 30 --backend sqlite
    DURABLE_TEST_PG_DSN=postgresql://... python -m benchmarks.simulate --seeds 500 --backend postgres
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from durable.testing.simulate import Finding, explore

OUT = Path(__file__).parent / "results" / "simulate"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.simulate", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", type=int, default=1000, help="seeds to explore (default 1000)")
    parser.add_argument("--start", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    parser.add_argument("--backend", choices=("memory", "sqlite", "postgres"), default="memory")
    parser.add_argument("--size", type=int, default=6, help="about how many calls a workflow body makes")
    parser.add_argument("--out", type=Path, default=OUT, help="where the shrunk tests and the report go")
    parser.add_argument("--no-shrink", action="store_true", help="report findings without shrinking them")
    parser.add_argument(
        "--sigkill",
        action="store_true",
        help="workers are processes SIGKILLed for real (slow)",
    )
    args = parser.parse_args(argv)
    dsn = os.environ.get("DURABLE_TEST_PG_DSN") if args.backend == "postgres" else None
    if args.backend == "postgres" and not dsn:
        parser.error("--backend postgres needs DURABLE_TEST_PG_DSN")
    args.out.mkdir(parents=True, exist_ok=True)
    kinds: dict[str, Finding] = {}

    def found(f: Finding) -> None:
        first = kinds.setdefault(f.outcome.signature, f)
        if first is f:
            print(f"seed {f.seed} after {f.seconds:.1f} s: {f.outcome.violations[0][:300]}", flush=True)

    seeds = range(args.start, args.start + args.seeds)
    budget = None if args.minutes is None else args.minutes * 60
    report = explore(
        seeds,
        backend=args.backend,
        dsn=dsn,
        size=args.size,
        budget_seconds=budget,
        on_finding=found,
        sigkill=args.sigkill,
    )
    print(report.summary())
    per_seed = report.seconds / report.seeds if report.seeds else 0.0
    steps = report.steps / report.seeds if report.seeds else 0.0
    print(f"{per_seed * 1000:.1f} ms per seed, {steps:.1f} steps per seed, backend {args.backend}")
    record = {
        "backend": args.backend,
        "seeds": report.seeds,
        "first_seed": args.start,
        "seconds": round(report.seconds, 1),
        "seeds_per_second": round(report.seeds / report.seconds, 2) if report.seconds else None,
        "steps": report.steps,
        "findings": len(report.findings),
        "kinds": {},
    }
    for kind, f in sorted(kinds.items()):
        entry = {"seed": f.seed, "seconds": round(f.seconds, 1), "violation": f.outcome.violations[0]}
        if not args.no_shrink:
            path = args.out / f"test_{kind.replace('-', '_')}_{args.backend}_{f.seed}.py"
            path.write_text(f.test(dsn=dsn))
            entry["test"] = str(path)
            print(f"{kind}: shrunk test of seed {f.seed} in {path}")
        record["kinds"][kind] = entry  # type: ignore[index]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.out / f"soak-{args.backend}-{stamp}.json").write_text(json.dumps(record, indent=1))
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
