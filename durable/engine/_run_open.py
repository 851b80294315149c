"""How a drive opens a run: its ``run.started`` recorded, or a resume checked against its log."""

from __future__ import annotations

from typing import Any

from ..errors import DriftChange, RunCancelledError, RunInterrupted
from ..events import (
    BUDGET_SET,
    DRIFT_ACCEPTED,
    INTERRUPT_RESUMED,
    LOG_FORMAT_VERSION,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_RESUMED,
    RUN_RETRIED,
    RUN_STARTED,
)
from . import _event_writer as ev
from ._artifacts import check_artifacts
from ._context import RunContext
from ._drift import acceptance_blockers, diff, drift_error, run_drift
from ._failures import recorded_run_failure
from ._manifest import output_schema_hash, run_manifest, run_manifest_hash
from ._rebind import signature_changes
from ._run_input import check_same_run
from ._session_manifest import recorded_model_drift
from ._spec import Spec
from ._tracing import traceparent
from ._values import ANY, to_json
from ._world import WorldCore

UNSET: Any = object()
"""No answer given (``resume=``), or a resume that did not find the run finished."""


def memory_manifest(world: WorldCore) -> dict[str, Any] | None:
    """The world's memory store as the manifest records it (``None`` when it was not opened).

    Read through ``world.memory_store`` so that the runner does not import the store,
    whose effects are decorated functions that reach back to the runner.
    """
    store = world.memory_store
    return None if store is None else store.manifest()


async def start_run(
    run: RunContext,
    spec: Spec,
    data: Any,
    input_hash: str,
    parent: tuple[str, str] | None,
    deadline_at: float | None,
    budget: dict[str, Any] | None = None,
) -> None:
    """Record the run's ``run.started`` (its input, manifest and format) and create it in the log.

    A ``budget`` (``Budget.to_json()``) is recorded as ``budget.set`` in the same
    transaction: a crash cannot leave a started run without the budget it was given.
    """
    memory = memory_manifest(run.world)
    manifest = run_manifest(spec, run.models, memory)
    code = run_manifest_hash(spec, manifest, run.models, memory)
    started = ev.run_started(
        spec.name,
        data,
        input_hash,
        manifest,
        code,
        run.models,
        output_schema_hash(spec),
        LOG_FORMAT_VERSION,
        parent=parent,
        deadline_at=deadline_at,
        traceparent=None if run.tracer is None else traceparent(),
    )
    run.emit(RUN_STARTED, started)
    limits = None if budget is None else ev.budget_set(budget)
    if limits is not None:
        run.emit(BUDGET_SET, limits)
    await run.flush_shared(created=(spec.name, parent[0] if parent else None), code=code)
    run.recorded.note(RUN_STARTED, started)
    if limits is not None:
        run.recorded.note(BUDGET_SET, limits)


def _taking_over(
    spec: Spec,
    started: dict[str, Any],
    current: dict[str, Any],
    current_hash: str,
    accepted: list[DriftChange],
) -> dict[str, Any]:
    """The ``drift.accepted`` that makes ``current`` the run's manifest.

    ``accepted``: the drift a person accepted for this drive; every other difference
    from the manifest in force (a capability the run never used, a compatible change)
    is recorded as ``replaced``, so calls recorded under an earlier signature still
    match (``_rebind``).
    """
    keys = {c.key for c in accepted}
    others = [c for c in diff(started.get("manifest") or {}, current) if c.key not in keys]
    return ev.drift_accepted(
        [{"key": c.key, "old": c.old, "new": c.new} for c in accepted],
        current,
        current_hash,
        output_schema_hash=output_schema_hash(spec),
        replaced=[{"key": c.key, "old": c.old, "new": c.new} for c in others],
    )


def check_resume(
    run: RunContext,
    spec: Spec,
    data: Any,
    input_hash: str,
    *,
    resume: Any,
    retry_failed: bool,
    resume_cancelled: bool,
    cancelling: bool = False,
) -> Any:
    """Check a resume against the run's log; the recorded output when the run completed, else ``UNSET``.

    Records what the resume changes: accepted drift, an answer to an interrupt,
    the continuation of a cancelled run, a retry of what failed for good.
    """
    rec = run.recorded
    started = rec.started or {}
    rid = run.run_id
    check_same_run(spec, rid, started.get("workflow"), started.get("input_hash", ""), data, input_hash)
    # A session's model reports drift under its own key (orchestratorModelSlotId).
    model_drift = recorded_model_drift(rid, rec.sessions, run.models)
    if model_drift is not None and not run.accepts(model_drift.changes):
        raise model_drift  # accepted, it is recorded when its session opens again
    memory = memory_manifest(run.world)
    current = run_manifest(spec, run.models, memory)  # once, for every use below
    changes = run_drift(started, spec, run.models, rec, current=current)
    current_hash = run_manifest_hash(spec, current, run.models, memory)
    same = started.get("manifest_hash") == current_hash
    # Calls recorded under an earlier signature of their function match it (``_rebind``).
    run.signatures = signature_changes(rec, current, same)
    if changes:
        blockers = acceptance_blockers(changes, rec)
        if not run.accepts(changes) or blockers:
            # Accepted or not, a drift whose recorded calls cannot replay is refused before any
            # write: taking the run over would leave it replayable by no code, its own included.
            raise drift_error(rid, changes, blockers)
        run.record(DRIFT_ACCEPTED, _taking_over(spec, started, current, current_hash, changes))
        run.flush()
    elif not same:
        # Nothing the run used differs: this code drives it, and from its first write on the
        # run's manifest is this code's, so the drift of later drives is judged against the
        # code that made the latest calls (and that can replay them).
        run.takeover = _taking_over(spec, started, current, current_hash, [])
    check_artifacts(run.world, rec, rid)
    terminal = rec.terminal
    if terminal is not None:
        kind, data = terminal
        if kind == RUN_COMPLETED:
            return spec.rebuild(data["output"])
        if kind == RUN_FAILED:
            if not retry_failed:
                raise recorded_run_failure(data, rid)
        elif kind == RUN_INTERRUPTED:
            if resume is UNSET and not cancelling:  # a cancel replays past the wait to undo
                raise RunInterrupted(
                    f"run {rid!r} is waiting at {data['path']!r} for an answer; call run_workflow "
                    "again with resume=<answer>.",
                    run_id=rid,
                    value=data.get("value"),
                    path=data["path"],
                )
            if resume is not UNSET:
                answer = to_json(ANY, resume, what="the resume answer", run_id=rid, path=data["path"])
                run.record(INTERRUPT_RESUMED, ev.interrupt_resumed(data["path"], answer))
                run.flush(status="running")
        elif kind == RUN_CANCELLED:
            reason = data.get("reason", "requested")
            if not resume_cancelled:
                raise RunCancelledError(
                    f"run {rid!r} was cancelled ({reason}); continue it with "
                    f"durable.resume_run({rid!r}, world=...) or `little resume {rid}`.",
                    run_id=rid,
                    reason=reason,
                )
            run.record(RUN_RESUMED, ev.run_resumed(reason))
            run.flush(status="running")
    if retry_failed:
        failed = list(rec.steps_failed) + [k for k, r in rec.receipts.items() if r["outcome"] == "error"]
        if failed or (terminal is not None and terminal[0] == RUN_FAILED):
            run.record(RUN_RETRIED, ev.run_retried(failed))
            run.flush(status="running")
    return UNSET
