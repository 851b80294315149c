"""``little diff RUN_A RUN_B``: two runs aligned by call path, and the reader the inspector shares.

The alignment itself is pure (``durable._run_diff``); this module reads the
two runs from the world (a step output stored as an artifact is read back,
decrypted when the world holds the key) and prints the result.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from .._artifacts import referenced
from .._recorded import Recorded
from .._run_diff import Call, align, calls_of, canonical, first_seqs, summary
from .._world import WorldCore
from ..errors import ArtifactIntegrityError
from ._registry import command, read_rows, table


@dataclass
class RunCalls:
    """A run as the diff and the inspector's tree read it.

    Attributes:
        run_id: The run.
        recorded: Its recorded index (the canonical state, large outputs read back).
        events: Its events as JSON data, in seq order.
        calls: Its calls by path, in the order they were first written.
        missing_artifacts: Why a referenced artifact could not be read (``None`` when all were).
    """

    run_id: str
    recorded: Recorded
    events: list[dict[str, Any]]
    calls: dict[str, Call]
    missing_artifacts: str | None = None


def read_calls(world: WorldCore, run_id: str) -> RunCalls:
    """Read a run's calls from ``world``.

    Raises:
        RunNotFoundError: The world has no such run.
        KeyMismatchError: The run's events are encrypted under a key the world does not hold.
    """
    rows = read_rows(world, run_id)
    rec = Recorded.from_rows(rows, run_id)
    missing = _inline_outputs(world, rec, run_id)
    events = _events(rows)
    return RunCalls(run_id, rec, events, calls_of(rec, _order(world, rec, events)), missing)


def _inline_outputs(world: WorldCore, rec: Recorded, run_id: str) -> str | None:
    """Put each step output stored as an artifact back in the index; say why one could not be read.

    Only outputs are read (not every saved artifact), and not checked against
    their hash: ``little verify`` does that, and a page refreshed live should not.
    """
    missing = None
    try:
        refs = referenced(rec, run_id)
    except ArtifactIntegrityError as exc:  # a malformed reference: the tree shows the raw event
        return str(exc).splitlines()[0]
    for ref, path in refs:
        if path is None:
            continue
        data = world.artifacts.get(ref.sha256)
        if data is None:
            missing = f"the output of {path} (artifact {ref.sha256}) is missing from the artifact store"
            continue
        try:
            rec.inline_output(path, json.loads(data))
        except ValueError:
            missing = f"the output of {path} (artifact {ref.sha256}) is not JSON"
    return missing


def _events(rows: list[tuple[int, str, str]]) -> list[dict[str, Any]]:
    events = []
    for seq, type_, data in rows:
        d = json.loads(data)
        d["seq"], d["type"] = seq, type_
        events.append(d)
    return events


def _order(world: WorldCore, rec: Recorded, events: list[dict[str, Any]]) -> dict[str, int]:
    """The first seq of each path; a fork's inherited calls take their place in the parent's log."""
    own = first_seqs(events)
    started = rec.started or {}
    parent, at = started.get("fork_of"), started.get("fork_seq")
    if not isinstance(parent, str) or not isinstance(at, int):
        return own
    parent_rows = world.log.read(parent)  # gone after a gc: inherited calls then come first, by position
    order = {p: s for p, s in first_seqs(_events(parent_rows)).items() if s <= at}
    return order | {p: s + at for p, s in own.items()}


def diff_runs(world: WorldCore, run_a: str, run_b: str) -> list[dict[str, Any]]:
    """The two runs' calls aligned by path (see ``durable._run_diff.align``)."""
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
    return table(shown, ["status", "path", "a", "b"]) + f"\n{head}"


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
