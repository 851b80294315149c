"""``little diff RUN_A RUN_B``: two runs aligned by call path.

The runs are read by ``durable.ops._run_calls`` (a step output stored as an
artifact is read back, decrypted when the world holds the key) and aligned
by the pure ``durable.ops._run_diff``, as the inspector's ``/compare`` does.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..engine import WorldCore
from ..ops import align, canonical, read_calls, summary
from ._registry import command, table


def diff_runs(world: WorldCore, run_a: str, run_b: str) -> list[dict[str, Any]]:
    """The two runs' calls aligned by path (see ``durable.ops._run_diff.align``)."""
    return align(read_calls(world, run_a).calls, read_calls(world, run_b).calls)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", help="the first run's id (for a fork: the run it was forked from)")
    p.add_argument("run_b", help="the second run's id")
    p.add_argument(
        "--changed", action="store_true", help="list only the paths that are not the same in both runs"
    )


def _value(side: dict[str, Any] | None) -> str:
    if side is None:
        return "-"
    if side["kind"] == "session":
        return "(session ended)" if side["outcome"] == "ok" else "(session running)"
    if side["outcome"] == "error":
        return str(side["error"])
    if side["outcome"] != "ok":
        return f"({side['outcome']})"
    text = canonical(side["output"])
    return text if len(text) <= 60 else text[:59] + "…"


def _human(rows: list[dict[str, Any]]) -> str:
    counts = summary(rows)
    shown = [
        {"status": r["status"], "path": r["path"], "a": _value(r["a"]), "b": _value(r["b"])} for r in rows
    ]
    head = ", ".join(f"{n} {s}" for s, n in counts.items())
    inputs = [
        f"  {r['path']}: {change}"
        for r in rows
        if r["b"] is not None
        for change in (r["b"].get("input_change") or {}).get("changes", [])
    ]
    more = "\ninputs that differ:\n" + "\n".join(inputs) if inputs else ""
    return table(shown, ["status", "path", "a", "b"]) + f"\n{head}{more}"


@command(
    "diff",
    "compare two runs call by call (same, changed, only_a, only_b), e.g. a fork and its parent",
    _args,
    human=_human,
)
def _diff(world: WorldCore, a: argparse.Namespace) -> Any:
    rows = diff_runs(world, a.run_a, a.run_b)
    if a.changed:
        rows = [r for r in rows if r["status"] != "same"]
    return rows
