"""Run and resume: the one place that combines the log, replay, locks and the engine."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from pydantic import ValidationError

from .._logging import INFO, note
from ..errors import (
    ConfigurationError,
    RunCancelled,
    RunCancelledError,
    RunFailedError,
    RunInterrupted,
    RunTimeoutError,
)
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
from ..store import hold
from . import _event_writer as ev
from ._artifacts import check_artifacts
from ._budget import Account, Budget, account_of, checked_budget
from ._compatible import step_additions
from ._context import CURRENT, NOTHING, Guard, RunContext, Scope, check_awaited
from ._failures import recorded_run_failure
from ._loader import recover_log, unsafe_unconfirmed
from ._manifest import (
    drift_error,
    manifest_cache,
    manifest_hash,
    output_schema_hash,
    run_drift,
    run_manifest,
)
from ._metrics import count_run
from ._run_end import close_failed, compensate_before_end, final_failure
from ._session_manifest import recorded_model_drift
from ._spec import Spec, spec_of
from ._sync_bodies import call_sync_body
from ._tracing import traceparent, tracing
from ._values import ANY, matches, to_json, value_hash
from ._world import WorldCore

_UNSET: Any = object()


def new_run_id() -> str:
    """A fresh, unique run id."""
    return f"run_{uuid.uuid4().hex}"


def workflow_spec(wf: Any) -> Spec:
    spec = spec_of(wf)
    if spec is None or spec.kind != "workflow":
        raise ConfigurationError(f"run_workflow needs a function decorated with @workflow, not {wf!r}.")
    return spec


def _input_params(spec: Spec) -> int:
    return len(spec.params())


def validate_input(spec: Spec, value: Any, run_id: str) -> tuple[Any, Any, str]:
    """The input rebuilt as the workflow's annotated type, its JSON and its hash."""
    params = spec.params()
    if not params:
        if value is not None:
            raise RunFailedError(
                f"workflow {spec.name!r} takes no input, but run {run_id!r} was given {value!r}.",
                cause_code="runtime_config_error",
                reason="invalid_input",
                run_id=run_id,
            )
        return None, None, value_hash(None)
    name, ad = params[0]
    try:
        value = ad.validate_python(value, by_alias=True, by_name=True)  # recorded inputs hold names
    except ValidationError as exc:
        raise RunFailedError(
            f"the input of workflow {spec.name!r} (parameter {name!r}) is not valid for run "
            f"{run_id!r}; nothing was recorded:\n{exc}",
            cause_code="runtime_config_error",
            reason="invalid_input",
            run_id=run_id,
        ) from exc
    data = to_json(ad, value, what="the input", run_id=run_id, path="")
    return value, data, value_hash(data)


async def run_workflow(
    wf: Any,
    input: Any = None,
    *,
    world: WorldCore,
    run_id: str | None = None,
    models: dict[str, str] | None = None,
    timeout: float | None = None,
    resume: Any = None,
    retry_failed: bool = False,
    accept_drift: Iterable[str] = (),
    budget: Budget | None = None,
) -> Any:
    """Run a workflow, or resume it when ``run_id`` names a run already in ``world``.

    A resume re-executes the workflow body from the top; every call the log
    marks as committed returns its recorded result without running, and only
    unfinished work runs. A finished run returns its recorded output (or
    re-raises its recorded error) without running anything.

    Args:
        wf: A function decorated with ``@workflow``.
        input: The workflow's input, validated against its annotation first.
        world: Where the run's log lives (``local_world()`` or ``memory_world()``).
        run_id: The run to start or resume; a new id is made when ``None``.
        models: Model slot mapping, e.g. ``{"worker": "gpt-5"}``.
        timeout: Seconds to wait in all (lock wait included); the run stays resumable.
        resume: The answer to the interrupt the run is waiting on (``None``: no answer;
            answer ``None`` itself with ``durable.handle(run_id, world=...).answer(None)``).
        retry_failed: Run again the steps and effects that failed for good.
        accept_drift: Drift keys, as a ``CapabilityDriftError`` prints them
            (``"tools.pay.options.idempotent"``), that this resume accepts: the
            run goes on with the changed code, the log records the accepted
            change, and later resumes compare with the new manifest. Drift
            under any other key still fails.
        budget: What the run and its child runs may spend on model calls
            (``durable.Budget``); a resume with another budget records it
            (raising or lowering the limits). Once spent, the next model call
            raises ``BudgetExhaustedError`` before it executes.

    Returns:
        The workflow's output.

    Raises:
        RunFailedError: Bad input, or a resume with another input or workflow.
        CapabilityDriftError: The code or models changed under the run.
        RunInterrupted: The run waits on ``durable.interrupt``; answer with ``resume=``.
        RunTimeoutError: ``timeout`` passed first.
        BudgetExhaustedError: A model call was due and the budget is spent.

    Example:
        >>> import asyncio, durable
        >>> @durable.workflow
        ... async def hello(name: str) -> str:
        ...     return f"hello {name}"
        >>> asyncio.run(durable.run_workflow(hello, "ada", world=durable.memory_world()))
        'hello ada'
    """
    spec = workflow_spec(wf)
    rid = run_id if run_id is not None else new_run_id()
    if not isinstance(rid, str) or not rid:
        raise ConfigurationError(f"run_id must be a non-empty string, not {rid!r}.")
    coro = drive(
        spec,
        input,
        world,
        run_id=rid,
        models=dict(models or {}),
        resume=_UNSET if resume is None else resume,
        retry_failed=retry_failed,
        accept_drift=_drift_keys(accept_drift),
        budget=None if budget is None else checked_budget(budget),
    )
    if timeout is None:
        return await coro
    try:
        async with asyncio.timeout(timeout):
            return await coro
    except TimeoutError:
        raise RunTimeoutError(_timeout_message(world, rid, timeout), run_id=rid) from None


def _timeout_message(world: WorldCore, run_id: str, timeout: float) -> str:
    """What a timed-out run's log allows: a plain resume, or a check of a tool first."""
    head = f"run {run_id!r} did not finish within {timeout} s"
    try:
        unsafe = unsafe_unconfirmed(recover_log(world.log, run_id))
    except Exception:  # the log cannot be read now: say what is known
        unsafe = []
    if not unsafe:
        return f"{head}; it stays resumable: call run_workflow again with the same run_id."
    keys = ", ".join(repr(k) for k in unsafe)
    return (
        f"{head} while a tool that is neither idempotent nor reconcilable was running ({keys}). "
        "It may or may not have happened, so a resume raises UnknownCommitError for it: check "
        f"the external system for idempotency key {run_id}:<key>, then start a new run, or "
        "make the tool safe to call again and resume with accept_drift= as that error says."
    )


async def drive(
    spec: Spec,
    input: Any,
    world: WorldCore,
    *,
    run_id: str,
    models: dict[str, str],
    parent: tuple[str, str] | None = None,
    resume: Any = _UNSET,
    retry_failed: bool = False,
    accept_drift: frozenset[str] = frozenset(),
    guard: Guard | None = None,
    deadline: float | None = None,
    lock_held: bool = False,
    resume_cancelled: bool = False,
    traceparent: str | None = None,
    budget: Budget | None = None,
    account: Account | None = None,
) -> Any:
    """Take the run's lock, check the log against the caller, and execute or replay.

    A runtime passes ``guard`` (cancellation, deadlines, stops), ``deadline``
    (seconds, recorded as an absolute time when the run starts), ``lock_held``
    (it took the run's lock itself), ``resume_cancelled`` (continue a
    cancelled run) and ``traceparent`` (the trace of the code that started
    the run, which a new run's span continues). ``budget`` is recorded when it
    differs from the run's; a child run counts against its parent's ``account``.
    """
    value, data, input_hash = validate_input(spec, input, run_id)
    how = _How(
        resume, retry_failed, accept_drift, guard, deadline, resume_cancelled, traceparent, budget, account
    )
    if lock_held:
        return await _drive_held(spec, value, data, input_hash, world, run_id, models, parent, how)
    async with hold(world.locks, f"run:{run_id}"):
        return await _drive_held(spec, value, data, input_hash, world, run_id, models, parent, how)


class _How(NamedTuple):
    resume: Any
    retry_failed: bool
    accept_drift: frozenset[str]
    guard: Guard | None
    deadline: float | None
    resume_cancelled: bool
    traceparent: str | None
    budget: Budget | None
    account: Account | None


async def _drive_held(
    spec: Spec,
    value: Any,
    data: Any,
    input_hash: str,
    world: WorldCore,
    run_id: str,
    models: dict[str, str],
    parent: tuple[str, str] | None,
    how: _How,
) -> Any:
    token = world.log.fence(run_id)
    rec = recover_log(world.log, run_id)
    run = RunContext(world, run_id, token, rec, models)
    run.accept_drift = how.accept_drift | frozenset(rec.drift_keys)  # and those a resolution accepted
    tracer = run.tracer = tracing()
    if tracer is None:
        return await _drive_run(run, spec, value, data, input_hash, parent, how)
    started = rec.started
    traced = tracer.start_run(
        spec.name,
        run_id,
        resumed=started is not None,
        recorded_calls=len(rec.steps_completed) + len(rec.receipts),
        link_to=None if started is None else started.get("traceparent"),
        parent=how.traceparent if started is None else None,
    )
    try:
        out = await _drive_run(run, spec, value, data, input_hash, parent, how)
    except BaseException as exc:
        traced.end(exc)
        raise
    traced.end()
    return out


async def _drive_run(
    run: RunContext,
    spec: Spec,
    value: Any,
    data: Any,
    input_hash: str,
    parent: tuple[str, str] | None,
    how: _How,
) -> Any:
    rec, run_id, world = run.recorded, run.run_id, run.world
    if rec.started is None:
        if how.resume is not _UNSET:
            raise ConfigurationError(
                f"run {run_id!r} does not exist, so it waits for no answer; resume= answers "
                "a run that raised RunInterrupted. Start it without resume=."
            )
        deadline_at = None if how.deadline is None else world.clock() + how.deadline
        _start(run, spec, data, input_hash, parent, deadline_at)
        count_run("started", spec.name)
        note(INFO, run_id, None, "run %s started (workflow %r)", run_id, spec.name, workflow=spec.name)
    else:
        finished = _check_resume(run, spec, data, input_hash, how)
        if finished is not _UNSET:
            return finished
        calls = len(rec.steps_completed) + len(rec.receipts)
        note(
            INFO,
            run_id,
            None,
            "run %s resumed (workflow %r): %d recorded calls replay",
            run_id,
            spec.name,
            calls,
            workflow=spec.name,
            recorded_calls=calls,
        )
    if how.budget is not None and how.budget.to_json() != rec.budget:
        run.record(BUDGET_SET, ev.budget_set(how.budget.to_json()))
        run.flush()
    run.account = how.account if how.account is not None else account_of(world, run_id, rec)
    run.guard = how.guard
    return await _execute(run, spec, value)


def _drift_keys(accept_drift: Iterable[str]) -> frozenset[str]:
    keys = [] if isinstance(accept_drift, str) else list(accept_drift)
    if isinstance(accept_drift, str) or not all(isinstance(k, str) for k in keys):
        raise ConfigurationError(
            f"accept_drift= takes a list of drift keys as a CapabilityDriftError prints them "
            f'(e.g. ["tools.pay.options.idempotent"]), not {accept_drift!r}.'
        )
    return frozenset(keys)


def memory_manifest(world: WorldCore) -> dict[str, Any] | None:
    """The world's memory store as the manifest records it (``None`` when it was not opened).

    Read through ``world.extensions`` so that the runner does not import the store,
    whose effects are decorated functions that reach back to the runner.
    """
    store = world.extensions.get("memory")
    return None if store is None else store.manifest()


def _start(
    run: RunContext,
    spec: Spec,
    data: Any,
    input_hash: str,
    parent: tuple[str, str] | None,
    deadline_at: float | None,
) -> None:
    cache = manifest_cache(run.world)
    manifest = run_manifest(spec, run.models, cache, memory_manifest(run.world))
    started = ev.run_started(
        spec.name,
        data,
        input_hash,
        manifest,
        manifest_hash(manifest),
        run.models,
        output_schema_hash(spec, cache),
        LOG_FORMAT_VERSION,
        parent=parent,
        deadline_at=deadline_at,
        traceparent=None if run.tracer is None else traceparent(),
    )
    run.emit(RUN_STARTED, started)
    run.flush(created=(spec.name, parent[0] if parent else None))
    run.recorded.note(RUN_STARTED, started)


def _check_resume(run: RunContext, spec: Spec, data: Any, input_hash: str, how: _How) -> Any:
    resume, retry_failed = how.resume, how.retry_failed
    rec = run.recorded
    started = rec.started or {}
    rid = run.run_id
    if started.get("workflow") != spec.name:
        raise RunFailedError(
            f"run {rid!r} belongs to workflow {started.get('workflow')!r}, not {spec.name!r}; "
            "resume it with its own workflow, or start a new run id.",
            cause_code="runtime_config_error",
            reason="run_workflow_mismatch",
            run_id=rid,
        )
    if not matches(started.get("input_hash", ""), data, input_hash):
        raise RunFailedError(
            f"run {rid!r} was started with another input (hash {started.get('input_hash')}, now "
            f"{input_hash}); a resume must pass the same input. Use a new run id for new input.",
            cause_code="runtime_config_error",
            reason="run_input_mismatch",
            run_id=rid,
        )
    # A session's model reports drift under its own key (orchestratorModelSlotId).
    model_drift = recorded_model_drift(rid, rec.sessions, run.models)
    if model_drift is not None and not run.accepts(model_drift.changes):
        raise model_drift  # accepted, it is recorded when its session opens again
    cache, memory = manifest_cache(run.world), memory_manifest(run.world)
    changes = run_drift(started, spec, run.models, rec, cache, memory)
    # Steps that only gained parameters with defaults: recorded calls match without them.
    run.added_params = step_additions(
        started.get("manifest") or {}, run_manifest(spec, run.models, cache, memory)
    )
    if changes:
        if not run.accepts(changes):
            raise drift_error(rid, changes)
        current = run_manifest(spec, run.models, cache, memory)
        accepted = [{"key": c.key, "old": c.old, "new": c.new} for c in changes]
        run.record(
            DRIFT_ACCEPTED,
            ev.drift_accepted(
                accepted, current, manifest_hash(current), output_schema_hash=output_schema_hash(spec, cache)
            ),
        )
        run.flush()
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
            if resume is _UNSET and getattr(how.guard, "reason", None) is None:  # a cancel replays to undo
                raise RunInterrupted(
                    f"run {rid!r} is waiting at {data['path']!r} for an answer; call run_workflow "
                    "again with resume=<answer>.",
                    run_id=rid,
                    value=data.get("value"),
                    path=data["path"],
                )
            if resume is not _UNSET:
                answer = to_json(ANY, resume, what="the resume answer", run_id=rid, path=data["path"])
                run.record(INTERRUPT_RESUMED, ev.interrupt_resumed(data["path"], answer))
                run.flush(status="running")
        elif kind == RUN_CANCELLED:
            reason = data.get("reason", "requested")
            if not how.resume_cancelled:
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
    return _UNSET


async def _execute(run: RunContext, spec: Spec, value: Any) -> Any:
    scope = Scope(run, "")
    token = CURRENT.set(scope)
    try:
        args = (value,) if _input_params(spec) else ()
        if spec.is_async:
            out = spec.fn(*args)
        else:
            out = call_sync_body(
                spec.fn, args, {}, what=f"workflow {spec.name!r}", run_id=run.run_id, path=""
            )
        if inspect.isawaitable(out):
            out = await out
        if scope.last is not NOTHING:
            check_awaited(scope, f"workflow {spec.name!r}")
        data = to_json(spec.out, out, what="the workflow output", run_id=run.run_id, path="")
    except RunInterrupted as exc:
        run.emit(RUN_INTERRUPTED, ev.run_interrupted(exc.path, exc.value))
        run.flush(status="interrupted")
        note(INFO, run.run_id, exc.path, "run %s is waiting at %r for an answer", run.run_id, exc.path)
        raise
    except RunCancelled as exc:
        done = await compensate_before_end(run, exc)
        with contextlib.suppress(BaseException):
            run.emit(RUN_CANCELLED, ev.run_cancelled(exc.reason, done))
            run.flush(status="cancelled")
        note(INFO, run.run_id, None, "run %s cancelled (%s)", run.run_id, exc.reason, reason=exc.reason)
        raise
    except BaseException as exc:
        done = await compensate_before_end(run, exc) if final_failure(exc) else []
        if close_failed(run, exc, done):
            count_run("failed", spec.name)
        raise
    finally:
        CURRENT.reset(token)
    run.emit(RUN_COMPLETED, ev.run_completed(data, value_hash(data)))
    run.flush(status="completed")
    count_run("completed", spec.name)
    note(INFO, run.run_id, None, "run %s completed", run.run_id)
    return out
