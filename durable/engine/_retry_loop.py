"""Steps and effects with a retry policy: attempt after attempt, each decision logged.

After a failed attempt the policy (``_retry_policy.decide``) is asked; the failure
and the decision are written in one transaction (``step.failed`` or an error
receipt, then ``retry.decision`` with the backoff and its wake time) before
the backoff sleep starts. A resume therefore continues where the log stops:
the attempt count goes on from the recorded decisions and the backoff waits
only for what is left of it. An attempt cut short by a crash is not a failed
attempt; it is run again under the same number.

Never retried: failures that are not the code's own outcome (drift,
nondeterminism, an unknown commit, cancellation) and ``NonRetryableError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._logging import ERROR, WARNING, note
from ..errors import NonRetryableError
from ..events import EFFECT_RECEIPT, RETRY_DECISION
from . import _event_writer as ev
from ._claim import REPLAYED
from ._compensation import remember
from ._context import CURRENT, RunContext
from ._decide import EXECUTE
from ._effects import EffectCall, effect_attempt, effect_begin, receipt_ok, settle
from ._failures import error_data, error_type, recordable
from ._recorded import Recorded
from ._retry_policy import Decision, RetryPolicy, decide
from ._spec import Spec
from ._steps import StepCall, step_attempt, step_begin, step_fail


class _Attempts:
    """The retry bookkeeping of one call: attempt number, timing and the pending backoff."""

    __slots__ = ("attempt", "first_at", "idle", "key", "policy", "run", "wake")

    def __init__(self, run: RunContext, key: str, policy: RetryPolicy):
        self.run = run
        self.key = key
        self.policy = policy
        rec: Recorded = run.recorded
        decisions = [d for d in rec.retries.get(key, ()) if d.get("decision") == "retry"]
        self.attempt = 1 + len(decisions)
        self.wake = rec.pending_wake(key)
        self.idle = sum(float(d.get("backoff") or 0.0) for d in decisions)
        first = decisions[0].get("first_attempt_at") if decisions else None
        self.first_at = float(first) if first is not None else run.clock()

    async def wait_backoff(self) -> None:
        """Sleep what is left of the backoff before the due attempt (nothing when past)."""
        if self.wake is not None:
            remaining = self.wake - self.run.clock()
            self.wake = None
            if remaining > 0:
                await self.run.pause(remaining)

    def decide(self, exc: BaseException) -> Decision:
        """Ask the policy about ``exc`` (``NonRetryableError`` gives up at once)."""
        if isinstance(exc, NonRetryableError):
            return Decision(False, 0.0)
        return decide(
            self.policy,
            exc,
            attempt=self.attempt,
            first_attempt_at=self.first_at,
            now=self.run.clock(),
            idle_for=self.idle,
        )

    def record(self, exc: BaseException, decision: Decision) -> None:
        """Buffer the ``retry.decision`` event and move on to the next attempt when retrying."""
        wake = self.run.clock() + decision.backoff if decision.retry else None
        self.run.emit(
            RETRY_DECISION,
            ev.retry_decision(
                self.key, self.attempt, decision.retry, decision.backoff, wake, error_type(exc), self.first_at
            ),
        )
        if decision.retry:
            note(
                WARNING,
                self.run.run_id,
                self.key,
                "run %s: %s attempt %d failed (%s); retrying in %.3g s",
                self.run.run_id,
                self.key,
                self.attempt,
                error_type(exc),
                decision.backoff,
                attempt=self.attempt,
                retry=True,
                backoff=decision.backoff,
                error_type=error_type(exc),
            )
            self.attempt += 1
            self.idle += decision.backoff
            self.wake = wake
        else:
            note(
                ERROR,
                self.run.run_id,
                self.key,
                "run %s: %s attempt %d failed (%s); giving up",
                self.run.run_id,
                self.key,
                self.attempt,
                error_type(exc),
                attempt=self.attempt,
                retry=False,
                backoff=0.0,
                error_type=error_type(exc),
            )


def _refresh(run: RunContext) -> None:
    """Index what this driver made durable, so a retried body replays what committed inside it."""
    run.recorded.update(run.log.read(run.run_id, run.recorded.last_seq), run.run_id)
    run.replaying = True


async def step_with_retry(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """An async ``@step`` with ``retry=``: run its body until it commits or the policy gives up."""
    with StepCall(CURRENT.get(), spec.label) as claimed:  # type: ignore[arg-type]
        call, replayed = step_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            return replayed
        assert isinstance(call, StepCall)
        assert spec.retry is not None
        run = call.run
        tries = _Attempts(run, call.path, spec.retry)
        call.attempt = tries.attempt
        while True:
            await tries.wait_backoff()
            try:
                out = await step_attempt(call, fn, args, kwargs)
            except BaseException as exc:
                if not recordable(exc):
                    raise
                decision = tries.decide(exc)
                step_fail(call, exc, final=not decision.retry)
                tries.record(exc, decision)
                await run.flush_async()
                if not decision.retry:
                    raise
                _refresh(run)
                call.attempt = tries.attempt
                call.emit_started()
                continue
            await run.flush_async()
            return out


async def effect_with_retry(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """An async ``@tool`` or ``@model_call`` with ``retry=``: one intent and receipt per attempt."""
    with EffectCall(CURRENT.get(), spec.label) as claimed:  # type: ignore[arg-type]
        call, replayed = effect_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            return replayed
        assert isinstance(call, EffectCall)
        assert spec.retry is not None
        run = call.run
        tries = _Attempts(run, call.key, spec.retry)
        while True:
            await tries.wait_backoff()
            try:
                result = await effect_attempt(call, fn, args, kwargs, tries.attempt)
                receipt_ok(call, result)
            except BaseException as exc:
                if not recordable(exc):
                    raise
                decision = tries.decide(exc)
                run.emit(EFFECT_RECEIPT, ev.receipt_error(call.key, error_data(exc), ev.elapsed_ms(call.t0)))
                tries.record(exc, decision)
                await run.flush_async()
                if not decision.retry:
                    raise
                call.action = EXECUTE
                call.emit_intent()
                continue
            await settle(call)
            if spec.compensate is not None:
                remember(run, spec, call.key, args, kwargs, result)
            return result
