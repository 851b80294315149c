"""``little verify``: check a run's log, its artifacts and, given the workflow, drift.

Pure reading: nothing is written to the log or the artifacts. The checks:

- the database's own integrity check (SQLite's ``PRAGMA integrity_check``);
- every event's seq follows the previous one without gaps;
- every event matches its schema, and the log format is one this SDK reads;
- every artifact the run references is present and matches its hash;
- with the workflow given, the recorded manifest against the current code,
  reported as the same ``key: old → new`` lines as ``CapabilityDriftError``.

Child runs the run started are checked the same way.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from pydantic import ValidationError

from ._artifacts import referenced, verify_payload
from ._capabilities import reachable
from ._manifest import change_lines, run_drift, undescribed
from ._recorded import Recorded
from ._spec import Spec, spec_of
from ._world import WorldCore
from .errors import (
    ArtifactIntegrityError,
    ConfigurationError,
    DriftChange,
    LogFormatError,
    RunNotFoundError,
)
from .events import parse_event


def _seq_problems(rows: list[tuple[int, str, str]]) -> list[str]:
    problems = []
    expected = rows[0][0] if rows and rows[0][1] == "snapshot" else 1
    for seq, _, _ in rows:
        if seq != expected:
            problems.append(f"seq gap: expected event {expected}, found {seq}")
        expected = seq + 1
    return problems


def _schema_problems(run_id: str, rows: list[tuple[int, str, str]]) -> list[str]:
    problems = []
    for seq, type_, data in rows:
        try:
            parse_event(run_id, seq, type_, data)
        except (ValidationError, ValueError, TypeError) as exc:
            first = str(exc).splitlines()[0]
            problems.append(f"event {seq} ({type_}) does not match the event schema: {first}")
    return problems


def _check_run(
    world: WorldCore,
    run_id: str,
    spec: Spec | None,
    models: dict[str, str] | None,
    report: dict[str, Any],
) -> None:
    rows = world.log.read(run_id)
    if not rows:
        report["problems"].append(f"run {run_id!r}: no events")
        return
    report["runs"].append(run_id)
    report["events"] += len(rows)
    problems = [f"run {run_id!r}: {p}" for p in _seq_problems(rows) + _schema_problems(run_id, rows)]
    report["problems"] += problems
    try:
        rec = Recorded.from_rows(rows, run_id)
    except LogFormatError as exc:
        report["problems"].append(str(exc).splitlines()[0])
        return
    except (KeyError, TypeError, ValueError) as exc:
        report["problems"].append(f"run {run_id!r}: the log cannot be replayed ({type(exc).__name__}: {exc})")
        return
    try:
        refs = referenced(rec, run_id)
    except ArtifactIntegrityError as exc:
        report["problems"].append(str(exc).splitlines()[0])
        refs = []
    for ref, _path in refs:
        report["artifacts"] += 1
        try:
            verify_payload(ref, world.artifacts.get(ref.sha256), run_id=run_id)
        except ArtifactIntegrityError as exc:
            report["problems"].append(str(exc).splitlines()[0])
    started = rec.started or {}
    prefix = "" if run_id == report["run_id"] else f"{run_id}: "
    report["undescribed"] += [prefix + key for key in undescribed(started.get("manifest") or {}, rec)]
    if spec is not None:
        if started.get("workflow") != spec.name:
            report["problems"].append(
                f"run {run_id!r} belongs to workflow {started.get('workflow')!r}, not {spec.name!r}"
            )
        else:
            use = models if models is not None else dict(started.get("models") or {})
            for c in run_drift(started, spec, use, rec):
                report["drift"].append(DriftChange(prefix + c.key, c.old, c.new))
    children = {s.name: s for s in reachable(spec)} if spec is not None else {}
    for intent in rec.intents.values():
        child = intent.get("child_run_id")
        if child:
            _check_run(world, child, children.get(intent.get("name", "")), models, report)


def verify_run(
    world: WorldCore, run_id: str, spec: Spec | None = None, models: dict[str, str] | None = None
) -> dict[str, Any]:
    """Check one run (and its child runs) without changing anything.

    Args:
        world: The world holding the run.
        run_id: The run to check.
        spec: The workflow as the current code defines it, to check drift; ``None`` skips drift.
        models: The model slot mapping to compare; ``None`` takes the recorded one.

    Returns:
        JSON-able data: ``ok``, ``problems`` (damage), ``changes`` (drift) and what was checked.

    Raises:
        RunNotFoundError: The world has no run with that id.
    """
    if not world.log.read(run_id):
        raise RunNotFoundError(f"no run {run_id!r} in this data directory; list runs with `little runs`.")
    report: dict[str, Any] = {
        "run_id": run_id,
        "runs": [],
        "events": 0,
        "artifacts": 0,
        "problems": [],
        "drift": [],
        "undescribed": [],
    }
    answer = world.log.integrity_check()
    if answer != "ok":
        report["problems"].append(f"database integrity check failed: {answer}")
    _check_run(world, run_id, spec, models, report)
    drift: list[DriftChange] = report.pop("drift")
    report["drift_checked"] = spec is not None
    report["changes"] = [{"key": c.key, "old": c.old, "new": c.new} for c in drift]
    report["change_lines"] = change_lines(drift) if drift else ""
    report["ok"] = not report["problems"] and not drift
    return report


def report_text(report: dict[str, Any]) -> str:
    """The human-readable form of ``verify_run``'s report."""
    lines = [
        f"run {report['run_id']}: {'ok' if report['ok'] else 'NOT OK'}",
        f"checked {len(report['runs'])} run(s), {report['events']} event(s), "
        f"{report['artifacts']} artifact(s)"
        + ("" if report["drift_checked"] else "; drift not checked (pass --workflow module:function)"),
    ]
    if report["undescribed"]:
        lines += [
            "",
            "Used but not in the recorded manifest (drift not checked; declare them with uses=[...]):",
        ] + [f"- {key}" for key in report["undescribed"]]
    if report["problems"]:
        lines += ["", "Problems:"] + [f"- {p}" for p in report["problems"]]
    if report["changes"]:
        lines += ["", "Changes detected:", report["change_lines"]]
        lines += [
            "",
            "To resume cleanly, restore the prior code or configuration and resume.",
            "To start fresh, run with a new run_id.",
        ]
    return "\n".join(lines)


def import_workflow(target: str) -> Spec:
    """The spec of the ``@workflow`` named ``module:function`` (imported from the current directory too).

    Raises:
        ConfigurationError: The target is malformed, cannot be imported, or is not a workflow.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"--workflow takes module:function, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigurationError(f"{module_name!r} has no {attr!r}")
    spec = spec_of(obj)
    if spec is None or spec.kind != "workflow":
        raise ConfigurationError(f"{target!r} is not a function decorated with @workflow")
    return spec


def parse_models(pairs: list[str]) -> dict[str, str]:
    """``["worker=gpt-5"]`` as ``{"worker": "gpt-5"}``.

    Raises:
        ConfigurationError: A pair is not ``SLOT=ID``.
    """
    models: dict[str, str] = {}
    for pair in pairs:
        slot, sep, model = pair.partition("=")
        if not sep or not slot or not model:
            raise ConfigurationError(f"--model takes SLOT=ID, not {pair!r}")
        models[slot] = model
    return models
