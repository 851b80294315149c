"""Before and after in one run: the same scenarios on two source trees, taking turns.

Run from the repository root, with two checkouts of the package (for
example the main branch in a second ``git worktree`` and this one)::

    python benchmarks/compare_trees.py BEFORE_TREE AFTER_TREE [--rounds 3] [--out DIR] [--smoke]

Each round runs, for each tree in turn (the order alternates from one round
to the next, so that a slow spell of a shared machine falls on both alike),
``python -m benchmarks --full --only a,b,c,g --no-peers --repeats 1`` and
``python -m benchmarks.runtime --full --only h --no-peers --repeats 1`` with
the tree first on ``PYTHONPATH`` and as the working directory, then the
exact opcodes per step (``benchmarks/opcodes.py write`` and ``replay``, with
``PYTHONHASHSEED=0``) once per tree. It prints one Markdown table: the
median over the rounds of each durable figure (microseconds per step, or
milliseconds of latency), before and after, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROWS: tuple[tuple[str, str, str], ...] = (
    *(
        (f"{key} | durable", field, unit)
        for key, unit in (
            ("a process", "µs/step"),
            ("a power", "µs/step"),
            ("b process", "µs/step"),
            ("b power", "µs/step"),
            ("c empty", "µs"),
            ("c completed", "µs/step"),
            ("c replay", "µs/step"),
            ("c killed", "µs/step"),
        )
        for field in ("per_us", "cpu_us")
    ),
    ("g | durable", "per_us", "µs/call"),
)
"""The figures compared: a key of the harness's JSON, its field, its unit."""


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["PYTHONHASHSEED"] = "0"
    return env


def _harness(tree: Path, module: str, only: str, out: Path, size: str) -> dict[str, Any]:
    """One run of a harness module on one tree; its JSON figures."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", module, size, "--only", only, "--no-peers", "--repeats", "1"]
    subprocess.run(
        [*cmd, "--quiet", "--out", str(out)], cwd=tree, env=_env(tree), check=True, capture_output=True
    )
    (found,) = sorted(out.glob("*.json"))[-1:]
    figures: dict[str, Any] = json.loads(found.read_text())
    found.unlink()
    return figures


def _opcodes(tree: Path, mode: str) -> str:
    """The last line ``opcodes.py`` prints for one mode on one tree."""
    done = subprocess.run(
        [sys.executable, "benchmarks/opcodes.py", mode],
        cwd=tree,
        env=_env(tree),
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip().splitlines()[-1]


def _value(figures: dict[str, Any], key: str, field: str) -> float | None:
    runs = figures.get(key) or []
    values = [r[field] for r in runs if isinstance(r, dict) and field in r]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    """Measure both trees in turns and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="keep the raw figures here as JSON")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script works")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    seen: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    scratch = Path(tempfile.mkdtemp(prefix="durable-compare-"))
    for i in range(args.rounds):
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        for name in order:
            size = "--smoke" if args.smoke else "--full"
            figures = _harness(trees[name], "benchmarks", "a,b,c,g", scratch / name, size)
            figures.update(_harness(trees[name], "benchmarks.runtime", "h", scratch / name, size))
            seen[name].append(figures)
            print(f"round {i + 1} {name} done", file=sys.stderr)
    latency = [(k, "median_ms", "ms") for k in sorted(seen["after"][0]) if k.startswith("h ")]
    lines = ["| figure | before | after | after / before |", "|---|---|---|---|"]
    for key, field, unit in (*ROWS, *latency):
        before = [v for f in seen["before"] if (v := _value(f, key, field)) is not None]
        after = [v for f in seen["after"] if (v := _value(f, key, field)) is not None]
        if not before or not after:
            continue
        b, a = statistics.median(before), statistics.median(after)
        what = {"cpu_us": ", CPU", "per_us": ", wall"}.get(field, "")
        lines.append(f"| {key}{what} ({unit}) | {b:.4g} | {a:.4g} | {a / b:.2f} |")
    for mode in ("write", "replay"):
        b, a = _opcodes(trees["before"], mode), _opcodes(trees["after"], mode)
        lines.append(f"| opcodes {mode} | {b} | {a} | |")
    print(f"medians over {args.rounds} rounds, the trees taking turns\n")
    print("\n".join(lines))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compare_trees.json").write_text(json.dumps(seen, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
