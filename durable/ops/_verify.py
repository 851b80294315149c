"""``little verify``: check a run's log, its artifacts and, given the workflow, drift.

Pure reading: nothing is written to the log or the artifacts. The checks:

- the database's own integrity check (SQLite's ``PRAGMA integrity_check``);
- every event's seq follows the previous one without gaps;
- every event matches its schema, and the log format is one this SDK reads;
- every recorded output (of a step or of the run) matches its ``output_hash``,
  and every snapshot's state matches its ``state_hash``;
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

from ..engine import (
    FIRST_TYPES,
    Recorded,
    Spec,
    WorldCore,
    change_lines,
    decode_state,
    loads,
    matches,
    reachable,
    referenced,
    run_drift,
    spec_of,
    undescribed,
    value_hash,
    verify_payload,
)
from ..errors import (
    ArtifactIntegrityError,
    CodecError,
    ConfigurationError,
    DriftChange,
    DurableError,
    RunNotFoundError,
)
from ..events import RUN_COMPLETED, STEP_COMPLETED, parse_event
from ..store import EncryptedLog, safe_location
from ._call_inputs import input_artifacts, input_problems, read_inputs


def _seq_problems(rows: list[tuple[int, str, str]]) -> list[str]:
    problems = []
    if rows and rows[0][1] not in FIRST_TYPES:  # a resume refuses it (LogCorruptedError)
        problems.append(f"the log begins with event {rows[0][0]} ({rows[0][1]}), not with its run.started")
    expected = rows[0][0] if rows and rows[0][1] == "snapshot" and isinstance(rows[0][0], int) else 1
    for seq, _, _ in rows:
        if not isinstance(seq, int):
            problems.append(f"an event after seq {expected - 1} has no valid seq ({seq!r})")
            continue
        if seq != expected:
            problems.append(f"seq gap: expected event {expected}, found {seq}")
        expected = seq + 1
    return problems


def _schema_problems(run_id: str, rows: list[tuple[int, str, str]]) -> list[str]:
    problems = []
    for seq, type_, data in rows:
        try:
            parse_event(run_id, seq, type_, data)
        except (ValidationError, ValueError, TypeError, RecursionError) as exc:
            first = str(exc).splitlines()[0]
            problems.append(f"event {seq} ({type_}) does not match the event schema: {first}")
    return problems


def _hash_problems(run_id: str, rows: list[tuple[int, str, str]]) -> list[str]:
    """Recorded outputs and snapshot states that no longer match the hash written with them.

    A resume returns a recorded output as it is: an output edited in the file
    would be returned silently. (An output held as an artifact is checked
    against the artifact's own hash instead.)
    """
    problems = []
    for seq, type_, data in rows:
        if type_ not in (STEP_COMPLETED, RUN_COMPLETED, "snapshot"):
            continue
        try:
            d = loads(data)
            if type_ == "snapshot":
                state = Recorded.from_state(decode_state(d["state"], run_id), run_id).state_hash()
                if state != d["state_hash"]:
                    problems.append(
                        f"event {seq} (snapshot): the state does not match its recorded state_hash "
                        f"({d['state_hash']}, found {state}); the log was edited or damaged"
                    )
                continue
            if d.get("artifact") is not None or "output_hash" not in d:
                continue
            output = d.get("output")
            if not matches(d["output_hash"], output, value_hash(output)):
                where = f" at path {d['path']!r}" if "path" in d else ""
                problems.append(
                    f"event {seq} ({type_}){where}: the output does not match its recorded "
                    "output_hash; the log was edited or damaged, and a resume would return "
                    "the changed output"
                )
        except (DurableError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            continue  # an unreadable event: the schema check reports it
    return problems


def _read_rows(world: WorldCore, run_id: str, report: dict[str, Any]) -> list[tuple[int, str, str]]:
    """The run's rows; of an encrypted log, each row that does not decrypt is reported and left out."""
    log = world.log
    if not isinstance(log, EncryptedLog):
        return log.read(run_id)
    rows = []
    for row in log.inner.read(run_id):
        try:
            rows.append(log.open(run_id, row))
        except CodecError as exc:
            report["problems"].append(str(exc).splitlines()[0])
    return rows


def _check_run(
    world: WorldCore,
    run_id: str,
    spec: Spec | None,
    models: dict[str, str] | None,
    report: dict[str, Any],
    called_again: bool = False,
) -> None:
    """Check one run into ``report``, then its child runs.

    ``called_again``: a parent's resume calls this run again (the parent has no
    receipt of it), so even completed, its drift would fail that resume.
    """
    try:
        rows = _read_rows(world, run_id, report)
    except DurableError as exc:  # the file is damaged where the run's rows are
        report["problems"].append(str(exc).splitlines()[0])
        return
    if not rows:
        report["problems"].append(f"run {run_id!r}: no events")
        return
    report["runs"].append(run_id)
    report["events"] += len(rows)
    problems = _seq_problems(rows) + _schema_problems(run_id, rows) + _hash_problems(run_id, rows)
    report["problems"] += [f"run {run_id!r}: {p}" for p in problems]
    try:
        rec = Recorded.from_rows(rows, run_id)
    except DurableError as exc:
        report["problems"].append(str(exc).splitlines()[0])
        return
    try:
        refs = referenced(rec, run_id)
    except ArtifactIntegrityError as exc:
        report["problems"].append(str(exc).splitlines()[0])
        refs = []
    for ref, _path in refs:
        report["artifacts"] += 1
        if ref.location is not None and not safe_location(ref.location):
            report["problems"].append(
                f"run {run_id!r}: artifact {ref.name!r} has the location {ref.location!r}, which "
                "points outside the data directory's artifacts/ folder; the log was edited or crafted"
            )
            continue
        try:
            verify_payload(ref, world.artifacts.get(ref.sha256), run_id=run_id)
        except ArtifactIntegrityError as exc:
            report["problems"].append(str(exc).splitlines()[0])
    try:
        inputs = read_inputs(world, run_id, rows)
        report["artifacts"] += len(input_artifacts(rec, run_id, rows))
        report["problems"] += [f"run {run_id!r}: {p}" for p in input_problems(inputs)]
    except ArtifactIntegrityError as exc:
        report["problems"].append(str(exc).splitlines()[0])
    started = rec.started or {}
    prefix = "" if run_id == report["run_id"] else f"{run_id}: "
    report["undescribed"] += [prefix + key for key in undescribed(started.get("manifest") or {}, rec)]
    completed = rec.terminal is not None and rec.terminal[0] == RUN_COMPLETED
    if spec is not None and completed and not called_again:
        report["completed"].append(run_id)  # it never resumes: no change of the code can fail it
    elif spec is not None:
        if started.get("workflow") != spec.name:
            report["problems"].append(
                f"run {run_id!r} belongs to workflow {started.get('workflow')!r}, not {spec.name!r}"
            )
        else:
            use = models if models is not None else dict(started.get("models") or {})
            for c in run_drift(started, spec, use, rec):
                report["drift"].append(DriftChange(prefix + c.key, c.old, c.new))
    children = {s.name: s for s in reachable(spec)} if spec is not None else {}
    for key, intent in rec.intents.items():
        child = intent.get("child_run_id")
        if child:
            again = key not in rec.receipts and not completed
            _check_run(world, child, children.get(intent.get("name", "")), models, report, again)


def database_problems(world: WorldCore) -> list[str]:
    """What the database's own integrity check finds (SQLite's ``PRAGMA integrity_check``), if anything."""
    try:
        answer = str(world.log.integrity_check())
    except DurableError as exc:
        answer = str(exc).splitlines()[0]
    return [] if answer == "ok" else [f"database integrity check failed: {answer}"]


def verify_run(
    world: WorldCore,
    run_id: str,
    spec: Spec | None = None,
    models: dict[str, str] | None = None,
    *,
    database: list[str] | None = None,
) -> dict[str, Any]:
    """Check one run (and its child runs) without changing anything.

    Args:
        world: The world holding the run.
        run_id: The run to check.
        spec: The workflow as the current code defines it, to check drift; ``None`` skips drift.
        models: The model slot mapping to compare; ``None`` takes the recorded one.
        database: What ``database_problems`` found already (checking many runs
            checks the whole file once); ``None`` runs the check.

    Returns:
        JSON-able data: ``ok``, ``problems`` (damage), ``changes`` (drift) and what was checked.

    Raises:
        RunNotFoundError: The world has no run with that id.
    """
    try:
        found = bool(world.log.read(run_id))
    except DurableError:
        found = True  # damaged where the run is: the checks below report it
    if not found:
        raise RunNotFoundError(f"no run {run_id!r} in this data directory; list runs with `little runs`.")
    report: dict[str, Any] = {
        "run_id": run_id,
        "runs": [],
        "events": 0,
        "artifacts": 0,
        "problems": [],
        "drift": [],
        "undescribed": [],
        "completed": [],
    }
    report["problems"] += database_problems(world) if database is None else database
    _check_run(world, run_id, spec, models, report)
    drift: list[DriftChange] = report.pop("drift")
    report["drift_checked"] = spec is not None
    report["changes"] = [{"key": c.key, "old": c.old, "new": c.new} for c in drift]
    report["change_lines"] = change_lines(drift) if drift else ""
    report["ok"] = not report["problems"] and not drift
    return report


def completed_text(run_ids: list[str]) -> str:
    """Why completed runs were left out of the drift check."""
    n = len(run_ids)
    return f"{n} completed run(s): a completed run never resumes, so no change of the code fails it"


def report_text(report: dict[str, Any]) -> str:
    """The human-readable form of ``verify_run``'s report."""
    lines = [
        f"run {report['run_id']}: {'ok' if report['ok'] else 'NOT OK'}",
        f"checked {len(report['runs'])} run(s), {report['events']} event(s), "
        f"{report['artifacts']} artifact(s)"
        + ("" if report["drift_checked"] else "; drift not checked (pass --workflow module:function)"),
    ]
    if report["completed"]:
        lines.append(f"drift not checked for {completed_text(report['completed'])}")
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
