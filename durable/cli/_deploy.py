"""``little dry-resume`` and ``little export``: checking new code against live runs before a deploy."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ..engine import WorldCore, spec_of
from ..ops import dry_resume
from ..worlds import export_run
from ._registry import CliError, command, run_id_arg
from ._runtime import _import

UNFINISHED = ("running", "interrupted")
"""Log statuses of runs a deploy meets in flight (a blocked or enqueued run's log says ``running``)."""


def _dry_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="the workflow as the code to deploy defines it, MODULE:ATTR")
    p.add_argument("run_ids", nargs="*", help="the runs to check (default with --all: every unfinished run)")
    p.add_argument("--all", action="store_true", help="check every unfinished run of the workflow")


def _check_dry(a: argparse.Namespace) -> None:
    if bool(a.run_ids) == bool(a.all):
        raise CliError("give the runs to check, or --all: little dry-resume MODULE:ATTR [RUN_ID ... | --all]")


def _dry_text(data: Any) -> str:
    if not data["runs"]:
        return f"no unfinished run of workflow {data['workflow']!r}"
    lines = []
    for r in data["runs"]:
        lines.append(r["line"])
        lines.extend("    " + line for line in r["detail"])
    failing = sum(1 for r in data["runs"] if not r["ok"])
    lines.append(
        f"{failing} of {len(data['runs'])} runs would fail under this code"
        if failing
        else f"all {len(data['runs'])} runs would go on under this code"
    )
    return "\n".join(lines)


@command(
    "dry-resume",
    "replay unfinished runs against new code without running or writing anything; exit 1 if any would fail",
    _dry_args,
    human=_dry_text,
    check=_check_dry,
)
def _dry_resume(world: WorldCore, a: argparse.Namespace) -> Any:
    _, wf = _import(a.target, "dry-resume")
    spec = spec_of(wf)
    if spec is None or spec.kind != "workflow":
        raise CliError(f"{a.target!r} is not a @workflow function")
    ids = list(a.run_ids)
    if a.all:
        ids = [i.run_id for s in UNFINISHED for i in world.log.runs(status=s, workflow=spec.name)]
    out = []
    for rid in ids:
        got = asyncio.run(dry_resume(wf, rid, world=world))
        out.append(
            {
                "run_id": rid,
                "ok": got.ok,
                "status": got.status,
                "continues_at": got.continues_at,
                "waits_for": got.waits_for,
                "error_type": None if got.error is None else type(got.error).__name__,
                "drift_keys": [c.key for c in got.changes],
                "line": got.line(),
                "detail": got.detail().splitlines(),
            }
        )
    a.exit_status = 1 if any(not r["ok"] for r in out) else 0
    return {"workflow": spec.name, "runs": out}


@command(
    "export",
    "write a run's log as JSON (decrypted: an encrypted run needs its key), for durable.testing.replay_file",
    run_id_arg,
    human=lambda data: json.dumps(data, indent=1, ensure_ascii=False),
)
def _export(world: WorldCore, a: argparse.Namespace) -> Any:
    return export_run(world, a.run_id)
