"""``run_workflow``: a run driven by the calling process, its outcome recorded as a worker records it.

The caller waits and gets the output or the error, as from any drive. What
the end means for everyone else is recorded as a worker records it: the
runner records ``run.failed`` for a final failure of the run's code, and an
error that waits for a person's decision (an unknown commit,
nondeterminism, a spent budget, a failed compensation) leaves the run
``blocked`` with its reason and fixes (``block_run``, the worker's own). So
``handle.result()``, ``little doctor`` and ``resume_run`` see what a worker
would have left. A run the runtime knows already (it has a control record:
it was blocked, resolved, resumed or started by ``start_workflow``) is
claimed by this process once its log accepted the drive, and its record
ends with the drive. A mistake of the call itself (another input, drift of
the caller's code) changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable
from typing import Any

from ..engine import (
    Budget,
    DriveOptions,
    Spec,
    WorldCore,
    accepted_drift_keys,
    checked_budget,
    checked_run_id,
    drive,
    open_run,
    recover_log,
    unsafe_unconfirmed,
    validate_input,
    workflow_spec,
)
from ..errors import RunCancelled, RunCancelledError, RunInterrupted, RunTimeoutError
from ..store import hold
from ._driver import HOST, block_run, control_of, default_driver, keeps_control, recorded_end, runtime_of
from ._guard import RunGuard
from ._outcome import BLOCKED, classify
from ._resolve import refuse_answer_while_cancelling

ACTIVE = ("enqueued", "claimed", "blocked", "waiting")
"""States of a control record whose run a driver may still take (``run_workflow`` claims it)."""


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

    The run ends as under a worker: a final failure of its code is recorded
    (``failed``: resume it with ``retry_failed=True`` or ``durable.resume_run``
    once the code is fixed), and an error that waits for a decision leaves it
    ``blocked`` (``handle.status_detail()`` and ``little doctor`` give its fixes).

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
        ConfigurationError: ``run_id`` is not a non-empty string of valid text, or an
            option is invalid; nothing is written then.
        SerializationError: The input cannot be stored (nothing is written), or a value
            of the run cannot (the run is then ``failed``).
        RunFailedError: Bad input, or a resume with another input or workflow.
        CapabilityDriftError: The code or models changed under the run.
        RunInterrupted: The run waits on ``durable.interrupt``; answer with ``resume=``.
        RunTimeoutError: ``timeout`` passed first.
        BudgetExhaustedError: A model call was due and the budget is spent: the run is
            ``blocked`` (reason ``budget``) until ``resume_run(run_id, budget=...)``, or a
            ``run_workflow`` with a larger ``budget``, raises it.
        UnknownCommitError: A plain tool's call may have happened: the run is
            ``blocked`` (reason ``unknown_commit``) until it is resolved.

    Example:
        >>> import asyncio, durable
        >>> @durable.workflow
        ... async def hello(name: str) -> str:
        ...     return f"hello {name}"
        >>> asyncio.run(durable.run_workflow(hello, "ada", world=durable.memory_world()))
        'hello ada'
    """
    spec = workflow_spec(wf)
    rid = checked_run_id(run_id)
    checked = validate_input(spec, input, rid)
    coro = _drive_here(
        spec,
        world,
        rid,
        checked,
        dict(models or {}),
        resume,
        retry_failed,
        accepted_drift_keys(accept_drift),
        None if budget is None else checked_budget(budget),
    )
    if timeout is None:
        return await coro
    try:
        async with asyncio.timeout(timeout):
            return await coro
    except TimeoutError:
        raise RunTimeoutError(_timeout_message(world, rid, timeout), run_id=rid) from None


async def _drive_here(
    spec: Spec,
    world: WorldCore,
    rid: str,
    checked: tuple[Any, Any, str],
    models: dict[str, str],
    resume: Any,
    retry_failed: bool,
    accept: frozenset[str],
    budget: Budget | None,
) -> Any:
    """Drive the run under its lock, then record its end as a worker's driver does."""
    async with hold(world.locks, f"run:{rid}"):
        opened = open_run(world, rid)
        claim = _Claim(world, spec, rid, resumed=opened[1].started is not None)
        answer = {} if resume is None else {"resume": resume}
        if answer and claim.resumed:
            refuse_answer_while_cancelling(world, rid)
        guard = _pending_cancel(world, rid) if claim.resumed else None
        try:
            out = await drive(
                spec,
                checked[0],
                world,
                run_id=rid,
                models=models,
                retry_failed=retry_failed,
                accept_drift=accept,
                budget=budget,
                options=DriveOptions(
                    lock_held=True, opened=opened, checked=checked, on_execute=claim, guard=guard
                ),
                **answer,
            )
        except RunInterrupted:
            claim.end()
            raise
        except RunCancelled as exc:  # asked to cancel before this drive: it undid and ended the run
            claim.end()
            raise RunCancelledError(
                f"run {rid!r} was cancelled ({exc.reason}) before this drive, which finished "
                f"cancelling it; continue it with durable.resume_run({rid!r}, world=...).",
                run_id=rid,
                reason=exc.reason,
            ) from None
        except Exception as exc:
            claim.settle(exc)
            raise
        claim.end()
        return out


def _pending_cancel(world: WorldCore, run_id: str) -> RunGuard | None:
    """A guard cancelled as the run's record asks, when a cancellation waits for its next drive.

    A worker's driver does the same: a run asked to cancel while nobody drove it
    (its canceller died in its undos, say) goes on cancelling, never completing.
    """
    if not keeps_control(world):
        return None
    rec = control_of(world).get(run_id)
    if rec is None or rec.cancel_reason is None:
        return None
    guard = RunGuard(run_id)
    guard.cancel(rec.cancel_reason)
    return guard


class _Claim:
    """The control record of a run ``run_workflow`` drives, when the runtime knows the run."""

    def __init__(self, world: WorldCore, spec: Spec, run_id: str, *, resumed: bool):
        self.world, self.spec, self.run_id = world, spec, run_id
        self.resumed = resumed  # a new run has no record (nobody else could have made one)
        self.claimed = False

    def __call__(self) -> None:
        """The log accepted the drive: claim the run's record for this process, if it has one."""
        world = self.world
        if not self.resumed or not keeps_control(world):
            return
        ctl = control_of(world)
        rec = ctl.get(self.run_id)
        if rec is None or rec.state not in ACTIVE:
            return
        owner = default_driver(world).owner
        ctl.adopt(self.run_id, self.spec.name, owner=owner, pid=os.getpid(), host=HOST, now=world.clock())
        self.claimed = True

    def end(self) -> None:
        """The run stopped with an outcome in its log: end its record, as a worker's driver does."""
        if self.claimed:
            with contextlib.suppress(Exception):  # a busy store: a worker finds the run finished
                control_of(self.world).finish(self.run_id, "done")

    def settle(self, exc: Exception) -> None:
        """After ``exc``: block the run, end its record, or (a cut, the call's own mistake) leave it."""
        world, rid = self.world, self.run_id
        try:
            if recorded_end(world, rid):
                self.end()
                return
            kind, reason = classify(exc)
            if kind == BLOCKED:
                assert reason is not None
                block_run(world, rid, reason, exc, self.spec.name)
                runtime_of(world).known[self.spec.name] = self.spec  # resume_run drives it here
        except Exception:  # the store cannot take it now: the run stays resumable as it is
            return


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
