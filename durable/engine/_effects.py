"""Effects: ``@tool`` and ``@model_call`` calls, bracketed by an intent and a receipt.

An effect claims the next position of its scope, builds its key and asks
the log (``Claim.effect``): a receipt replays; an intent without one is an
unknown commit, re-driven, reconciled or refused by the decision; nothing
recorded means the intent is made durable, the body runs, and the receipt
follows. A child workflow called in a body is an effect whose intent
carries the child's run id.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..events import EFFECT_INTENT, EFFECT_RECEIPT
from . import _event_writer as ev
from ._budget import usage_of
from ._call_inputs import INPUT_INLINE_LIMIT, input_again, large_input
from ._claim import REPLAYED, Claim
from ._compensation import note_undoable
from ._context import CURRENT, EFFECT_KEY, Scope
from ._decide import EXECUTE, FAIL, RECONCILE, REPLAY, Action, Call
from ._failures import error_data, rebuild_from, recordable
from ._keys import effect_key, idempotency_key
from ._manifest import SECTIONS
from ._metrics import record_attempt
from ._nested_calls import body_recorded_calls
from ._rebind import SignatureChange, earlier_input
from ._spec import NEVER_HAPPENED as NEVER_HAPPENED
from ._spec import Spec
from ._values import stored_bytes, to_json

if TYPE_CHECKING:
    from ._context import RunContext
    from ._recorded import Recorded
    from ._tracing import Traced


class EffectCall(Claim):
    """One effect call: its claim on the scope, then its key, input and what the decision said."""

    __slots__ = ("action", "ih", "input", "key", "recorded_input", "spec", "t0")

    spec: Spec
    key: str
    input: Any
    ih: str
    recorded_input: dict[str, Any]  # the ``input`` or ``input_ref`` its intent records (``_call_inputs``)
    action: Action  # EXECUTE (intent buffered), REDRIVE or RECONCILE
    t0: float  # when this attempt began (``time.perf_counter()``), for the receipt's ``ms``

    @property
    def idempotency_key(self) -> str:
        """``<run id>:<key>``, what the body sees as ``durable.idempotency_key()``."""
        return idempotency_key(self.run.run_id, self.key)

    def emit_intent(self, child_run_id: str | None = None) -> None:
        """Buffer this attempt's ``effect.intent``."""
        self.t0 = time.perf_counter()
        spec = self.spec
        self.run.emit(
            EFFECT_INTENT,
            ev.effect_intent(
                self.key, spec.kind, spec.name, self.ih, self.n, child_run_id, self.recorded_input
            ),
        )


def effect_begin(
    spec: Spec,
    call: EffectCall,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    child_run_id: Callable[[str], str] | None = None,
) -> tuple[Any, Any]:
    """Build the effect's key and ask the log; ``(REPLAYED, result)`` or ``(call, None)``.

    A recorded result is rebuilt, except a stream's (its chunks are in its
    ``stream.cursor`` events, which ``_streams`` rebuilds).
    """
    run = call.run
    kind = spec.kind
    key = effect_key(call.scope.prefix, kind, spec.name, call.n)
    inp, raw, ih = spec.dump_input(args, kwargs, run.run_id, key)
    if spec.compensate is not None:
        note_undoable(run, spec)
    action = EXECUTE
    if run.replaying:
        asked, change = asked_hash(run, spec, key, inp, ih) if run.signatures else (ih, None)
        action, receipt = call.effect(
            Call(kind, spec.name, asked, key),
            inp,
            redrivable=kind != "tool" or spec.idempotent or _body_replays(run.recorded, key),
            reconcilable=spec.reconcile is not None,
            signature=change,
        )
        if action is REPLAY:
            assert receipt is not None
            result = receipt["result"]
            return REPLAYED, result if spec.is_asyncgen else spec.rebuild(result)
        if action is FAIL:
            assert receipt is not None
            raise rebuild_from(receipt, run_id=run.run_id, path=key)
    if kind == "model" and run.account is not None:
        run.account.check(run.run_id, key)  # before the call executes: a spent budget blocks the run
    call.spec, call.key, call.input, call.ih, call.action = spec, key, inp, ih, action
    call.recorded_input = (
        {"input": inp}
        if len(raw) <= INPUT_INLINE_LIMIT
        else large_input(run, spec.name, key, inp, raw)
        if action is EXECUTE
        else input_again(run, spec.name, key, inp, raw)  # its intent is in the log: a retry repeats it
    )
    call.t0 = time.perf_counter()
    if action is EXECUTE:
        call.emit_intent(None if child_run_id is None else child_run_id(key))
    return call, None


def asked_hash(
    run: RunContext, spec: Spec, key: str, inp: dict[str, Any], ih: str
) -> tuple[str, SignatureChange | None]:
    """The input hash to ask the log with, and the function's earlier signatures in this run.

    A call recorded under an earlier signature of the function is asked
    with the hash of its input as that signature recorded it (``_rebind``).
    """
    change = run.signatures.get(f"{SECTIONS[spec.kind]}.{spec.name}")
    if change is not None:
        intent = run.recorded.intents.get(key)
        if intent is not None and intent["input_hash"] != ih:
            return earlier_input(spec, change, intent["input_hash"], inp, ih)[1], change
    return ih, change


def _body_replays(rec: Recorded, key: str) -> bool:
    """Whether an unconfirmed tool's body recorded durable calls of its own (which replay)."""
    if key not in rec.intents or key in rec.receipts:
        return False
    return body_recorded_calls(rec, key)


def receipt_ok(call: EffectCall, result: Any) -> None:
    """Buffer the receipt of an effect that returned ``result``."""
    run = call.run
    data = to_json(call.spec.out, result, what="the result", run_id=run.run_id, path=call.key)
    stored_bytes(data, what="the result", run_id=run.run_id, path=call.key)
    receipt = ev.receipt_ok(call.key, data, ev.elapsed_ms(call.t0))
    if call.spec.kind == "model":
        count_model_call(call, receipt, data)
    run.emit(EFFECT_RECEIPT, receipt)


def count_model_call(call: EffectCall, receipt: dict[str, Any], result: Any) -> None:
    """Put the usage a model call's result reports in its receipt; count it against the budget."""
    usage = usage_of(result)
    if usage is not None:
        receipt["usage"] = usage
    run = call.run
    if run.account is not None:
        run.account.add(receipt)


def span_usage(traced: Traced, call: EffectCall, out: Any) -> None:
    """Put a model call's reported usage on its span (``durable.usage.*``)."""
    usage = usage_of(out) if call.spec.kind == "model" else None
    if usage is None:
        return
    span = traced.span
    span.set_attribute("durable.usage.input_tokens", usage["input_tokens"])
    span.set_attribute("durable.usage.output_tokens", usage["output_tokens"])
    if "model" in usage:
        span.set_attribute("durable.usage.model", usage["model"])
    account = call.run.account
    if account is not None:
        this = usage["input_tokens"] + usage["output_tokens"]
        span.set_attribute("durable.budget.calls", account.calls + 1)
        span.set_attribute("durable.budget.tokens", account.input_tokens + account.output_tokens + this)


def receipt_error(call: EffectCall, exc: BaseException) -> bool:
    """Buffer the receipt of an effect that raised the code's own failure; say whether one was."""
    if not recordable(exc):
        return False
    receipt = ev.receipt_error(call.key, error_data(exc), ev.elapsed_ms(call.t0))
    if call.spec.kind == "model" and call.run.account is not None:
        call.run.account.add(receipt)  # it executed: a failed call counts as a call
    call.run.emit(EFFECT_RECEIPT, receipt)
    return True


async def effect_attempt(
    call: EffectCall,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    attempt: int = 1,
) -> Any:
    """One attempt of an effect: ask ``reconcile=`` or make the intent durable, then call.

    Returns the effect's result (or the reconciled one); the caller writes the receipt.
    """
    run = call.run
    traced = None if run.tracer is None else start_span(call, attempt)
    started = time.perf_counter()
    try:
        if call.action is RECONCILE:
            answer = call.spec.reconcile(call.idempotency_key, call.input)  # type: ignore[misc]
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not NEVER_HAPPENED:
                if traced is not None:
                    traced.span.set_attribute("durable.reconciled", True)
                    traced.end()
                return answer
        elif call.action is EXECUTE:
            await run.flush_async()  # the intent is durable before anything leaves
        token = EFFECT_KEY.set(call.idempotency_key)
        try:
            out = await fn(*args, **kwargs)
        finally:
            EFFECT_KEY.reset(token)
    except BaseException as exc:
        if traced is not None:
            traced.end(exc)
        if run.meters is not None and isinstance(exc, Exception):
            seconds = time.perf_counter() - started
            record_attempt(run.meters, call.spec.kind, call.spec.name, seconds, ok=False)
        raise
    if traced is not None:
        span_usage(traced, call, out)
        traced.end()
    if run.meters is not None:
        record_attempt(run.meters, call.spec.kind, call.spec.name, time.perf_counter() - started, ok=True)
    return out


def start_span(call: EffectCall, attempt: int, *, current: bool = True) -> Traced:
    """Start the span of one attempt of an effect (tracing is on)."""
    run = call.run
    spec = call.spec
    assert run.tracer is not None
    traced = run.tracer.start(spec.name, run.run_id, call.key, attempt, spec.kind, current=current)
    if call.action is not EXECUTE:  # the log held an intent without a receipt
        traced.span.set_attribute("durable.redriven", True)
    return traced


async def effect_async(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """An async ``@tool`` or ``@model_call`` called inside a run."""
    with EffectCall(CURRENT.get(), spec.label) as claimed:  # type: ignore[arg-type]
        call, replayed = effect_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            return replayed
        return await confirm(call, effect_attempt(call, fn, args, kwargs))


async def confirm(call: EffectCall, outcome: Awaitable[Any]) -> Any:
    """Await an effect's outcome and record it: its receipt, or its error (durable at once)."""
    run = call.run
    try:
        result = await outcome
        receipt_ok(call, result)
    except BaseException as exc:
        if receipt_error(call, exc):
            await run.flush_async()
        raise
    await settle(call)
    return result


async def settle(call: EffectCall) -> None:
    """Make a buffered receipt durable: at once for a plain tool, batched where a re-drive is safe.

    A plain tool's receipt that a crash loses turns a finished call into an
    unknown commit, which refuses to resume; so it reaches the log before the
    caller sees the result. With ``"power"`` durability that commit is not
    fsynced on its own: a process crash cannot lose it, and the step's commit
    that follows syncs it; a power loss before then loses the receipt, which
    fails closed as an unknown commit, never as a repeated call. A model call, a child run or an idempotent or
    reconcilable tool would be re-driven or reconciled, so its receipt rides
    with the next durable point (or the next event-loop turn).
    """
    spec = call.spec
    run = call.run
    if spec.kind == "tool" and not spec.idempotent and spec.reconcile is None:
        if run.active <= 1:
            run.flush(sync=False)  # a process crash cannot lose it; the step's commit syncs it
        else:
            await run.flush_async()
    else:
        run.flush_soon()


def effect_sync(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A sync ``@tool`` or ``@model_call`` called inside a run."""
    with EffectCall(CURRENT.get(), spec.label) as claimed:  # type: ignore[arg-type]
        call, replayed = effect_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            return replayed
        run = call.run
        traced = None if run.tracer is None else start_span(call, 1)
        try:
            if call.action is RECONCILE:
                answer = spec.reconcile(call.idempotency_key, call.input)  # type: ignore[misc]
                if answer is not NEVER_HAPPENED:
                    receipt_ok(call, answer)
                    run.flush()
                    if traced is not None:
                        traced.end()
                    return answer
            elif call.action is EXECUTE:
                run.flush()
            token = EFFECT_KEY.set(call.idempotency_key)
            try:
                result = fn(*args, **kwargs)
            finally:
                EFFECT_KEY.reset(token)
            receipt_ok(call, result)
        except BaseException as exc:
            if traced is not None:
                traced.end(exc)
            if receipt_error(call, exc):
                run.flush()
            raise
        if traced is not None:
            span_usage(traced, call, result)
            traced.end()
        run.flush()
        return result


def current_effect_key() -> str | None:
    """The idempotency key of the running effect (``durable.idempotency_key()``); ``None`` outside a run."""
    key = EFFECT_KEY.get()
    if key is None:
        if CURRENT.get() is None:
            return None  # a plain call: the decorated function is the function itself
        raise ConfigurationError(
            "durable.idempotency_key() is only available inside a @tool or @model_call body "
            "running in a durable run (a step or workflow body has no idempotency key)."
        )
    return key


def in_effect_body(scope: Scope) -> bool:
    """Whether the current code runs inside an effect's body (which holds ``scope``)."""
    return EFFECT_KEY.get() is not None and scope.busy is not None
