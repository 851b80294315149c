"""``little verify`` and ``little compact`` over several runs, or every run (``--all``).

A run that cannot be handled (not found, locked by a live driver) is
reported with the others' results and never stops them; the command exits
with status 1 when any run failed or had findings. A bar on stderr shows how
far the work has got (``_progress``). One run named alone keeps the
single-run output the commands always had.
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from typing import Any

from ..engine import Spec, WorldCore, change_lines
from ..errors import DriftChange, DurableError
from ..ops import compact, completed_text, database_problems, verify_run
from ..store import TERMINAL, RunInfo
from ._progress import progress_bar
from ._registry import CliError

FINISHED = tuple(sorted(TERMINAL))
"""The statuses ``compact --all`` compacts: a run in one of them appends nothing more unless resumed."""
PAGE = 500
"""Runs read from the log at a time when listing every run."""


def all_runs(world: WorldCore) -> list[RunInfo]:
    """Every run in the world, newest first, read a page at a time (each run once)."""
    seen: dict[str, RunInfo] = {}
    offset = 0
    while True:
        page = world.log.runs(limit=PAGE, offset=offset)
        for info in page:
            seen.setdefault(info.run_id, info)
        if len(page) < PAGE:
            return list(seen.values())
        offset += PAGE


def runs_args(p: argparse.ArgumentParser, verb: str, every: str) -> None:
    """The ``[RUN_ID]...`` and ``--all`` arguments of a command over many runs."""
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help=f"the runs to {verb} (see `little runs`)")
    p.add_argument("--all", action="store_true", dest="every", help=every)


def check_runs(a: argparse.Namespace) -> None:
    """Run ids or ``--all``, exactly one of the two.

    Raises:
        CliError: Neither or both were given.
    """
    if a.every and a.run_ids:
        raise CliError("pass run ids or --all, not both")
    if not a.every and not a.run_ids:
        raise CliError("pass one or more run ids (as `little runs` lists them), or --all for every run")


def many(a: argparse.Namespace) -> bool:
    """Whether the command reports on many runs (``--all``, or more than one id)."""
    return bool(a.every) or len(a.run_ids) > 1


# -- verify --------------------------------------------------------------------


def verify_many(
    world: WorldCore, run_ids: list[str] | None, spec: Spec | None, models: dict[str, str] | None
) -> dict[str, Any]:
    """One report over the runs named (``None``: every run, of ``spec``'s workflow when given).

    A run's child runs are checked with it; with ``--all`` every run is
    checked once, a child run as part of its parent's report. The database's
    integrity check runs once for all of them.
    """
    database = database_problems(world)
    infos = all_runs(world) if run_ids is None else []
    known = {i.run_id for i in infos}
    if run_ids is not None:
        ids = list(dict.fromkeys(run_ids))
    else:
        ids = [
            i.run_id
            for i in infos
            if (i.parent_run_id is None or i.parent_run_id not in known)
            and (spec is None or i.workflow == spec.name)
        ]
    results: list[dict[str, Any]] = []
    covered: set[str] = set()
    stopped = None
    with progress_bar("verifying") as update:
        update(0, len(ids))
        try:
            for run_id in ids:
                results.append(_verify_one(world, run_id, spec, models))
                covered.update(results[-1]["runs"])
                update(len(results), len(ids))
            if run_ids is None and spec is None:
                # A child run that no parent's log names (its parent's record of it is gone) is checked alone.
                rest = [i.run_id for i in infos if i.run_id not in covered]
                for n, run_id in enumerate(rest, 1):
                    if run_id not in covered:
                        results.append(_verify_one(world, run_id, spec, models))
                        covered.update(results[-1]["runs"])
                    update(len(ids) + n, len(ids) + len(rest))
        except KeyboardInterrupt:  # verify only reads: stopping anywhere is safe
            stopped = {"after": len(results), "of": len(ids)}
    report = _verify_report(results, database, spec is not None)
    if stopped is not None:  # runs left unchecked: not a clean bill of health
        report["ok"] = False
    return report | {"stopped": stopped}


def _verify_one(
    world: WorldCore, run_id: str, spec: Spec | None, models: dict[str, str] | None
) -> dict[str, Any]:
    try:
        return verify_run(world, run_id, spec, models, database=[])
    except DurableError as exc:  # not found: a finding about this run, the others go on
        return {
            "run_id": run_id,
            "ok": False,
            "runs": [],
            "events": 0,
            "artifacts": 0,
            "problems": [str(exc).splitlines()[0]],
            "changes": [],
            "undescribed": [],
            "completed": [],
        }


def _verify_report(results: list[dict[str, Any]], database: list[str], drift_checked: bool) -> dict[str, Any]:
    problems = [{"run_id": None, "problem": p} for p in database]
    problems += [{"run_id": r["run_id"], "problem": p} for r in results for p in r["problems"]]
    return {
        "ok": not database and all(r["ok"] for r in results),
        "runs_checked": len(results),
        "runs_with_findings": [r["run_id"] for r in results if not r["ok"]],
        "child_runs_checked": sum(max(len(r["runs"]) - 1, 0) for r in results),
        "events": sum(r["events"] for r in results),
        "artifacts": sum(r["artifacts"] for r in results),
        "drift_checked": drift_checked,
        "problems": problems,
        "changes": [{"run_id": r["run_id"]} | c for r in results for c in r["changes"]],
        "undescribed": [{"run_id": r["run_id"], "key": k} for r in results for k in r["undescribed"]],
        "completed": [run_id for r in results for run_id in r["completed"]],
        "results": [
            {
                "run_id": r["run_id"],
                "ok": r["ok"],
                "runs": r["runs"],
                "events": r["events"],
                "artifacts": r["artifacts"],
                "problems": len(r["problems"]),
                "changes": len(r["changes"]),
            }
            for r in results
        ],
    }


def verify_text(report: dict[str, Any]) -> str:
    """The human-readable form of ``verify_many``'s report."""
    bad = report["runs_with_findings"]
    lines = [
        f"verified {report['runs_checked']} run(s): "
        + ("ok" if report["ok"] else f"NOT OK ({len(bad)} with findings)" if bad else "NOT OK"),
        f"checked {report['runs_checked']} run(s) and {report['child_runs_checked']} child run(s), "
        f"{report['events']} event(s), {report['artifacts']} artifact(s)"
        + ("" if report["drift_checked"] else "; drift not checked (pass --workflow module:function)"),
    ]
    if report["completed"] and report["drift_checked"]:
        lines.append(f"drift not checked for {completed_text(report['completed'])}")
    if report["stopped"]:
        lines.append(_stopped_text(report["stopped"], "checked"))
    if report["undescribed"]:
        lines += [
            "",
            "Used but not in the recorded manifest (drift not checked; declare them with uses=[...]):",
        ] + [f"- {u['run_id']}: {u['key']}" for u in report["undescribed"]]
    if report["problems"]:
        lines += ["", "Problems:"]
        lines += [f"- {p['run_id'] or 'database'}: {p['problem']}" for p in report["problems"]]
    if report["changes"]:
        lines += ["", "Changes detected:"]
        for run_id, changes in itertools.groupby(report["changes"], key=lambda c: c["run_id"]):
            drift = [DriftChange(c["key"], c["old"], c["new"]) for c in changes]
            lines += [f"run {run_id}:", change_lines(drift)]
        lines += ["", "To resume a run cleanly, restore the prior code or configuration and resume it."]
    return "\n".join(lines)


# -- compact -------------------------------------------------------------------


def _already_compact(world: WorldCore, run_id: str) -> bool:
    """Whether the run's log is one snapshot and nothing else (compacting it again changes nothing)."""
    first = list(itertools.islice(world.log.iter_rows(run_id), 2))
    return len(first) == 1 and first[0][1] == "snapshot"


def compact_many(world: WorldCore, a: argparse.Namespace) -> dict[str, Any]:
    """Compact the runs named, or with ``--all`` every finished run not compact already.

    A run that fails (not found, a live driver holds it) is reported and the
    rest go on; ``--vacuum`` gives the space back once at the end.
    """
    skipped: Counter[str] = Counter()
    if a.every:
        wanted = set(a.status or FINISHED)
        infos = all_runs(world)
        skipped.update(i.status for i in infos if i.status not in FINISHED)
        ids = [i.run_id for i in infos if i.status in wanted]
    else:
        ids = list(dict.fromkeys(a.run_ids))
    compacted: list[dict[str, Any]] = []
    unchanged: list[str] = []
    failed: list[dict[str, Any]] = []
    stopped = None
    with progress_bar("compacting") as update:
        update(0, len(ids))
        for n, run_id in enumerate(ids, 1):
            try:
                if a.every and _already_compact(world, run_id):
                    unchanged.append(run_id)
                else:
                    compacted.append(compaction_row(compact(run_id, world=world)))
            except DurableError as exc:
                error = str(exc).splitlines()[0]
                failed.append({"run_id": run_id, "error": error, "reason": getattr(exc, "reason", None)})
            except KeyboardInterrupt:  # each compaction is one transaction: the one cut short is undone
                stopped = {"after": n - 1, "of": len(ids)}
                break
            update(n, len(ids))
    vacuumed = bool(a.vacuum and compacted)
    if vacuumed:
        world.vacuum()
    return {
        "ok": not failed and stopped is None,
        "stopped": stopped,
        "compacted": compacted,
        "events_replaced": sum(c["events_replaced"] for c in compacted),
        "already_compact": unchanged,
        "failed": failed,
        "skipped": {
            "count": sum(skipped.values()),
            "by_status": dict(sorted(skipped.items())),
            "reason": "not finished: --all compacts only completed, failed and cancelled runs",
        },
        "vacuumed": vacuumed,
    }


def compaction_row(done: Any) -> dict[str, Any]:
    """A ``Compaction`` as the command prints it."""
    return {
        "run_id": done.run_id,
        "snapshot_seq": done.snapshot_seq,
        "events_replaced": done.removed,
        "state_hash": done.state_hash,
    }


def compact_text(data: dict[str, Any]) -> str:
    """The human-readable form of ``compact_many``'s report."""
    lines = [f"compacted {len(data['compacted'])} run(s), replacing {data['events_replaced']} event(s)"]
    if data["already_compact"]:
        lines.append(f"left {len(data['already_compact'])} run(s) that are one snapshot already")
    skipped = data["skipped"]
    if skipped["count"]:
        statuses = ", ".join(f"{s}: {n}" for s, n in skipped["by_status"].items())
        lines.append(
            f"skipped {skipped['count']} run(s) that have not finished ({statuses}): --all compacts only "
            "completed, failed and cancelled runs; name a run to compact it anyway"
        )
    if data["failed"]:
        lines.append(f"failed to compact {len(data['failed'])} run(s):")
        lines += [f"  {f['run_id']}: {f['error']}" for f in data["failed"]]
    if data["vacuumed"]:
        lines.append("gave the freed space back to the disk")
    if data["stopped"]:
        lines.append(_stopped_text(data["stopped"], "compacted"))
    return "\n".join(lines)


def _stopped_text(stopped: dict[str, int], done: str) -> str:
    return (
        f"stopped by Ctrl-C after {stopped['after']} of {stopped['of']} run(s); "
        f"the rest were not {done}: run the command again for them"
    )


def exit_status(data: dict[str, Any]) -> int:
    """130 when Ctrl-C stopped the work (as a shell reports SIGINT), 1 on any failure or finding, else 0."""
    if data.get("stopped"):
        return 130
    return 0 if data["ok"] else 1
