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

from ..events import EFFECT_RECEIPT
from . import _event_writer as ev
from ._attempts import Attempts
from ._claim import REPLAYED
from ._context import CURRENT, RunContext
from ._decide import EXECUTE
from ._effects import EffectCall, effect_attempt, effect_begin, receipt_ok, settle
from ._failures import error_data, recordable
from ._spec import Spec
from ._steps import StepCall, step_attempt, step_begin, step_fail


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
        tries = Attempts(run, call.path, spec.retry)
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
        tries = Attempts(run, call.key, spec.retry)
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
            return result
