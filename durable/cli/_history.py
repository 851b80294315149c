"""``little`` commands that go back in a run's history or maintain it.

``checkpoints``, ``restore``, ``fork``, ``compact`` and ``gc``, registered in
the ``little`` command table.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ..engine import WorldCore, decode_state
from ..events import RUN_STARTED
from ..ops import UNCHANGED, checkpoints, compact, fork, gc, restore
from ._bulk import (
    FINISHED,
    check_runs,
    compact_many,
    compact_text,
    compaction_row,
    exit_status,
    many,
    runs_args,
)
from ._progress import progress_bar
from ._registry import CliError, command, table

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``15m``, ``12h``, ``7d`` or ``2w`` (and ``0``, the same in every unit).

    Raises:
        CliError: The text is not such a duration, or is a number without a unit.
    """
    m = _DURATION.match(text.strip())
    if m is None:
        raise CliError(f"--older-than takes a duration like 90s, 15m, 12h, 7d or 2w, not {text!r}")
    number, unit = m.group(1), m.group(2)
    if not unit and float(number) != 0:
        # A bare number deletes runs: guessing its unit wrong deletes the wrong ones.
        raise CliError(
            f"--older-than {text.strip()} has no unit: write {number}s for seconds, or "
            f"{number}m, {number}h, {number}d or {number}w"
        )
    return float(number) * _UNIT[unit]


def _checkpoint_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="the run's id (see `little runs`)")
    p.add_argument("checkpoint", help="a checkpoint's seq or step path (see `little checkpoints`)")


def _checkpoint_value(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _checkpoints_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="the run's id (see `little runs`)")


def _checkpoints_human(data: Any) -> str:
    return table(data, ["seq", "kind", "path", "state_version"])


@command(
    "checkpoints",
    "list the points a run can be restored to or forked from (one per committed step)",
    _checkpoints_args,
    human=_checkpoints_human,
)
def _checkpoints(world: WorldCore, a: argparse.Namespace) -> Any:
    return [
        {"seq": c.seq, "kind": c.kind, "path": c.path, "state_version": c.state_version}
        for c in checkpoints(a.run_id, world=world)
    ]


@command(
    "restore",
    "roll a run back to a checkpoint; the next resume runs again what came after it",
    _checkpoint_arg,
)
def _restore(world: WorldCore, a: argparse.Namespace) -> Any:
    done = restore(a.run_id, _checkpoint_value(a.checkpoint), world=world)
    return {
        "run_id": done.run_id,
        "checkpoint": done.checkpoint.seq,
        "path": done.checkpoint.path,
        "state_version": done.state_version,
        "restored_seq": done.seq,
        "next": "resume the run with run_workflow(..., run_id=...) to run the rest again",
    }


def _fork_args(p: argparse.ArgumentParser) -> None:
    _checkpoint_arg(p)
    p.add_argument("--run-id", dest="new_run_id", help="the new run's id (default: a fresh one)")
    p.add_argument("--input", help="the new run's input as JSON (default: the parent's input)")
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="SLOT=MODEL",
        help="map a model slot in the new run (repeatable; unnamed slots keep the parent's model)",
    )


@command(
    "fork",
    "start a new run from a checkpoint, reusing everything committed before it",
    _fork_args,
)
def _fork(world: WorldCore, a: argparse.Namespace) -> Any:
    value: Any = UNCHANGED
    if a.input is not None:
        try:
            value = json.loads(a.input)
        except json.JSONDecodeError as exc:
            raise CliError(f"--input is not valid JSON: {exc}") from None
    models: dict[str, str] | None = None
    if a.model:
        parent = world.log.read(a.run_id, after_seq=0)
        models = _parent_models(parent)
        for item in a.model:
            slot, sep, model = item.partition("=")
            if not sep or not slot or not model:
                raise CliError(f"--model takes SLOT=MODEL, not {item!r}")
            models[slot] = model
    made = fork(
        a.run_id,
        _checkpoint_value(a.checkpoint),
        world=world,
        new_run_id=a.new_run_id,
        input=value,
        models=models,
    )
    return {
        "run_id": made.run_id,
        "fork_of": made.parent_run_id,
        "checkpoint": made.checkpoint.seq,
        "input": made.input,
        "models": made.models,
        "reused": made.reused,
        "next": "run it with run_workflow(wf, input, run_id=..., models=...) to run the rest",
    }


def _parent_models(rows: list[tuple[int, str, str]]) -> dict[str, str]:
    for _, type_, data in rows:
        if type_ == RUN_STARTED:
            return dict(json.loads(data).get("models") or {})
        if type_ == "snapshot":
            started = decode_state(json.loads(data)["state"]).get("started") or {}
            return dict(started.get("models") or {})
    return {}


def _compact_args(p: argparse.ArgumentParser) -> None:
    runs_args(
        p,
        "compact",
        "compact every finished run (completed, failed or cancelled) that is not one snapshot already",
    )
    p.add_argument(
        "--status",
        action="append",
        choices=list(FINISHED),
        help="with --all: only finished runs with this status (repeatable)",
    )
    p.add_argument(
        "--vacuum", action="store_true", help="give the freed space back to the disk afterwards (once)"
    )


def _check_compact(a: argparse.Namespace) -> None:
    if a.status and not a.every:
        raise CliError("--status picks among the runs --all compacts; pass it with --all")
    check_runs(a)


def _compact_human(data: Any) -> str:
    if "compacted" in data:
        return compact_text(data)
    return "\n".join(f"{k}: {v}" for k, v in data.items())


@command(
    "compact",
    "replace each run's events with one snapshot of its state (earlier checkpoints go); "
    "exit 1 if any run fails",
    _compact_args,
    human=_compact_human,
    check=_check_compact,
)
def _compact(world: WorldCore, a: argparse.Namespace) -> Any:
    if many(a):
        data = compact_many(world, a)
        a.exit_status = exit_status(data)
        return data
    done = compact(a.run_ids[0], world=world)
    if a.vacuum:
        world.vacuum()
    return compaction_row(done) | {"vacuumed": a.vacuum}


def _gc_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        help="delete finished runs not updated for this long, with a unit: 90s, 15m, 12h, 7d, 2w",
    )
    p.add_argument("--dry-run", action="store_true", help="only list the runs that would be deleted")
    p.add_argument(
        "--vacuum",
        action="store_true",
        help="give the freed space back to the disk afterwards (SQLite VACUUM, Postgres VACUUM FULL: "
        "each rewrites the log's tables and holds the world's writers while it runs)",
    )


def _gc_human(data: Any) -> str:
    verb = "would delete" if data["dry_run"] else "deleted"
    runs = data["runs"]
    return f"{verb} {len(runs)} run(s)" + "".join(f"\n  {r}" for r in runs)


@command(
    "gc",
    "delete finished (completed, failed or cancelled) runs older than a given age",
    _gc_args,
    human=_gc_human,
)
def _gc(world: WorldCore, a: argparse.Namespace) -> Any:
    seen = (0, 0)

    def track(done: int, total: int) -> None:
        nonlocal seen
        seen = (done, total)
        update(done, total)

    with progress_bar("deleting") as update:
        try:
            deleted = gc(
                world=world, older_than=parse_duration(a.older_than), dry_run=a.dry_run, progress=track
            )
        except KeyboardInterrupt:  # each run goes in its own transaction: those handled are gone
            raise CliError(
                f"stopped by Ctrl-C after {seen[0]} of {seen[1]} run(s), each deleted whole; "
                "run little gc again for the rest"
            ) from None
    if a.vacuum and deleted and not a.dry_run:
        world.vacuum()
    return {"dry_run": a.dry_run, "runs": deleted}
