"""Run and resume: the one place that combines the log, replay, locks and the engine."""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, NamedTuple

from .._logging import INFO, note
from ..errors import ConfigurationError, RunCancelled, RunCancelledError, RunInterrupted
from ..events import BUDGET_SET, RUN_CANCELLED, RUN_COMPLETED, RUN_INTERRUPTED
from ..store import hold
from . import _event_writer as ev
from ._budget import Account, Budget, account_of
from ._carried import Carried
from ._context import CURRENT, NOTHING, RunContext, Scope, check_awaited
from ._loader import recover_log
from ._metrics import count_run, meters
from ._recorded import Recorded
from ._run_end import close_failed, compensate_before_end, fails_run
from ._run_input import PLAIN, DriveOptions, validate_input
from ._run_open import UNSET, check_resume, start_run
from ._spec import Spec
from ._sync_bodies import call_sync_body
from ._tracing import tracing
from ._values import to_json, value_hash
from ._world import WorldCore


def open_run(world: WorldCore, run_id: str) -> tuple[int, Recorded]:
    """Take a new fencing token for the run, then read its log: what a drive starts from.

    The fence comes first, so that no driver it made stale can add to the log
    after this read. The caller holds the run's lock.
    """
    token = world.log.fence(run_id)
    return token, recover_log(world.log, run_id)


async def drive(
    spec: Spec,
    input: Any,
    world: WorldCore,
    *,
    run_id: str,
    models: dict[str, str],
    parent: tuple[str, str] | None = None,
    resume: Any = UNSET,
    retry_failed: bool = False,
    accept_drift: frozenset[str] = frozenset(),
    budget: Budget | None = None,
    account: Account | None = None,
    options: DriveOptions = PLAIN,
) -> Any:
    """Take the run's lock, check the log against the caller, and execute or replay.

    A runtime passes its ``options`` (see ``DriveOptions``). ``budget`` is
    recorded when it differs from the run's; a child run counts against its
    parent's ``account``.
    """
    value, data, input_hash = options.checked or validate_input(spec, input, run_id)
    how = _How(resume, retry_failed, accept_drift, budget, account, options)
    if options.lock_held:
        return await _drive_held(spec, value, data, input_hash, world, run_id, models, parent, how)
    async with hold(world.locks, f"run:{run_id}"):
        return await _drive_held(spec, value, data, input_hash, world, run_id, models, parent, how)


class _How(NamedTuple):
    resume: Any
    retry_failed: bool
    accept_drift: frozenset[str]
    budget: Budget | None
    account: Account | None
    options: DriveOptions


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
    token, rec = how.options.opened or open_run(world, run_id)
    run = RunContext(world, run_id, token, rec, models)
    world.commits.drives += 1  # while others are driven beside it, its commits are grouped
    try:
        run.accept_drift = how.accept_drift | frozenset(rec.drift_keys)  # and those a resolution accepted
        run.meters = meters()
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
            parent=how.options.traceparent if started is None else None,
        )
        try:
            out = await _drive_run(run, spec, value, data, input_hash, parent, how)
        except BaseException as exc:
            traced.end(exc)
            raise
        traced.end()
        return out
    finally:
        world.commits.drives -= 1


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
        if how.resume is not UNSET:
            raise ConfigurationError(
                f"run {run_id!r} does not exist, so it waits for no answer; resume= answers "
                "a run that raised RunInterrupted. Start it without resume=."
            )
        deadline = how.options.deadline
        deadline_at = None if deadline is None else world.clock() + deadline
        budget = None if how.budget is None else how.budget.to_json()
        await start_run(run, spec, data, input_hash, parent, deadline_at, budget)
        count_run("started", spec.name, run.meters)
        note(INFO, run_id, None, "run %s started (workflow %r)", run_id, spec.name, workflow=spec.name)
    else:
        finished = check_resume(
            run,
            spec,
            data,
            input_hash,
            resume=how.resume,
            retry_failed=how.retry_failed,
            resume_cancelled=how.options.resume_cancelled,
            cancelling=getattr(how.options.guard, "reason", None) is not None,
        )
        if finished is not UNSET:
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
    run.guard = how.options.guard
    if how.options.on_execute is not None:
        how.options.on_execute()
    return await _execute(run, spec, value)


async def _execute(run: RunContext, spec: Spec, value: Any) -> Any:
    scope = Scope(run, "")
    token = CURRENT.set(scope)
    try:
        args = (value,) if spec.params() else ()
        try:
            if spec.is_async:
                out = spec.fn(*args)
            else:
                out = call_sync_body(
                    spec.fn, args, {}, what=f"workflow {spec.name!r}", run_id=run.run_id, path=""
                )
            if inspect.isawaitable(out):
                try:
                    out = await out
                finally:
                    if run.children:  # a child run the body left driving stops before the run's end
                        await run.halt_children()
        except Carried as carried:  # through framework code: the run ends on the error itself
            raise carried.error from carried.error.__cause__
        if scope.last is not NOTHING:
            check_awaited(scope, f"workflow {spec.name!r}")
        data = to_json(spec.out, out, what="the workflow output", run_id=run.run_id, path="")
    except RunInterrupted as exc:
        run.emit(RUN_INTERRUPTED, ev.run_interrupted(exc.path, exc.value))
        run.flush(status="interrupted")
        note(INFO, run.run_id, exc.path, "run %s is waiting at %r for an answer", run.run_id, exc.path)
        raise
    except (RunCancelled, RunCancelledError) as exc:
        # RunCancelledError: a child run's cancellation the body let through ends the run as
        # cancelled too (its driver records it so), where it left the run unended and re-driven.
        done = await compensate_before_end(run, spec, exc)
        with contextlib.suppress(BaseException):
            run.emit(RUN_CANCELLED, ev.run_cancelled(exc.reason, done))
            run.flush(status="cancelled")
        note(INFO, run.run_id, None, "run %s cancelled (%s)", run.run_id, exc.reason, reason=exc.reason)
        raise
    except BaseException as exc:
        done = await compensate_before_end(run, spec, exc) if fails_run(exc) else []
        if close_failed(run, exc, done):
            count_run("failed", spec.name, run.meters)
        raise
    finally:
        CURRENT.reset(token)
    run.emit(RUN_COMPLETED, ev.run_completed(data, value_hash(data)))
    await run.flush_shared(status="completed")
    count_run("completed", spec.name, run.meters)
    note(INFO, run.run_id, None, "run %s completed", run.run_id)
    return out
