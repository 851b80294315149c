"""Compensation: the ``compensate=`` tools of a run's confirmed calls, run when it fails or is cancelled.

Each confirmed call of a ``@tool(compensate=undo)`` (executed or replayed)
is remembered with its arguments and result, in the order the calls were
confirmed. When the run fails for good or is cancelled, ``compensate`` calls
each ``undo`` newest first, before the run's end is recorded; each is a
durable effect of its own keyed ``compensate:<original key>`` (an intent,
then a receipt), so a crash in the middle leaves a run that is recovered,
fails (or is cancelled) again the same way on replay, and goes on with the
compensations not yet confirmed: a confirmed one never runs twice, one cut
mid-call is re-driven only if ``undo`` is idempotent or reconcilable
(otherwise the run is blocked with ``UnknownCommitError``), and one that
fails for good (after its ``retry=``) raises ``CompensationFailedError``,
which leaves the run ``blocked`` with the failing key.
"""

from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any

from ..errors import CompensationFailedError, UnknownCommitError
from ..events import EFFECT_INTENT, EFFECT_RECEIPT
from . import _event_writer as ev
from ._attempts import Attempts
from ._call_inputs import recorded_input
from ._context import EFFECT_KEY, Compensation
from ._failures import error_data, recordable
from ._keys import COMPENSATE, idempotency_key
from ._spec import NEVER_HAPPENED, Spec, spec_of
from ._values import stored_bytes, to_json

if TYPE_CHECKING:
    from ._context import RunContext
    from ._recorded import Recorded


def remember(
    run: RunContext, spec: Spec, key: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any
) -> None:
    """Note a confirmed call of a tool with ``compensate=`` (executed, or replayed from the log)."""
    if run.compensations is None:
        run.compensations = []
    run.compensations.append(Compensation(key, spec.compensate, args, dict(kwargs), result))


def compensated_keys(receipts: dict[str, Any]) -> list[str]:
    """The compensations a run's receipts confirm, as ``compensate:<key>``."""
    return [k for k, r in receipts.items() if k.startswith(COMPENSATE) and r.get("outcome") == "ok"]


def undo_pending(rec: Recorded) -> list[str]:
    """The confirmed calls of ``compensate=`` tools whose compensation is not confirmed, by key.

    Read from the log alone (the run's manifest names each tool's
    ``compensate=``): what a cancellation must undo before the run can end.
    """
    tools = ((rec.started or {}).get("manifest") or {}).get("tools") or {}
    undoable = {name for name, d in tools.items() if (d.get("options") or {}).get("compensate")}
    return [
        key
        for key, r in rec.receipts.items()
        if r.get("outcome") == "ok"
        and not key.startswith(COMPENSATE)
        and (rec.intents.get(key) or {}).get("name") in undoable
        and (rec.receipts.get(COMPENSATE + key) or {}).get("outcome") != "ok"
    ]


async def compensate(run: RunContext) -> list[str]:
    """Run every remembered compensation, newest first; the keys of those confirmed.

    Raises:
        CompensationFailedError: A compensation failed for good (its receipt records the error).
        UnknownCommitError: A plain ``undo`` was cut mid-call by an earlier crash.
    """
    todo = list(reversed(run.compensations or ()))
    guard, run.guard = run.guard, None  # a cancellation is what started them: they run to the end
    try:
        for c in todo:
            await _one(run, c)
    finally:
        run.guard = guard
    return [COMPENSATE + c.key for c in todo]


async def _one(run: RunContext, c: Compensation) -> None:
    key = COMPENSATE + c.key
    spec = spec_of(c.undo)
    assert spec is not None  # checked at decoration
    rec = run.recorded
    receipt = rec.receipts.get(key)
    if receipt is not None and receipt.get("outcome") == "ok":
        return  # confirmed by an earlier drive: never twice
    # A recorded failure did not undo anything: a drive after a person's decision tries again.
    kwargs = {**c.kwargs, "result": c.result}
    inp, raw, ih = spec.dump_input(c.args, kwargs, run.run_id, key)
    if receipt is None and key in rec.intents and not (spec.idempotent or spec.reconcile is not None):
        raise UnknownCommitError(
            f"the compensation {key!r} of run {run.run_id!r} was cut mid-call and its tool "
            f"{spec.name!r} is neither idempotent nor reconcilable, so it may or may not have "
            f"happened. Check the external system for idempotency key {idempotency_key(run.run_id, key)}, "
            "then resolve it (`little resolve RUN_ID KEY --happened | --not-happened`).",
            run_id=run.run_id,
            key=key,
        )
    if receipt is None and key in rec.intents and spec.reconcile is not None:
        answer = spec.reconcile(idempotency_key(run.run_id, key), inp)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is not NEVER_HAPPENED:  # it happened before the crash: its answer is the receipt
            _confirm(run, spec, key, answer, time.perf_counter())
            await run.flush_async()
            return
    tries = Attempts(run, key, spec.retry) if spec.retry is not None else None
    while True:
        if tries is not None:
            await tries.wait_backoff()
        t0 = time.perf_counter()
        recorded = recorded_input(run, spec.name, key, inp, raw)
        run.emit(EFFECT_INTENT, ev.effect_intent(key, "tool", spec.name, ih, 0, None, recorded))
        await run.flush_async()  # the intent is durable before the undo leaves
        token = EFFECT_KEY.set(idempotency_key(run.run_id, key))
        try:
            out = spec.fn(*c.args, **kwargs)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:
            if not recordable(exc):
                raise
            run.emit(EFFECT_RECEIPT, ev.receipt_error(key, error_data(exc), ev.elapsed_ms(t0)))
            if tries is not None:
                decision = tries.decide(exc)
                tries.record(exc, decision)
                await run.flush_async()
                if decision.retry:
                    continue
            await run.flush_async()
            raise _failed(run, key, type(exc).__qualname__, str(exc)) from exc
        finally:
            EFFECT_KEY.reset(token)
        _confirm(run, spec, key, out, t0)
        await run.flush_async()  # confirmed before the next one starts
        return


def _confirm(run: RunContext, spec: Spec, key: str, out: Any, t0: float) -> None:
    data = to_json(spec.out, out, what="the result", run_id=run.run_id, path=key)
    stored_bytes(data, what="the result", run_id=run.run_id, path=key)
    run.emit(EFFECT_RECEIPT, ev.receipt_ok(key, data, ev.elapsed_ms(t0)))


def _failed(run: RunContext, key: str, error_type: Any, message: Any) -> CompensationFailedError:
    return CompensationFailedError(
        f"the compensation {key!r} of run {run.run_id!r} failed for good ({error_type}: {message}); "
        "the run is blocked until a person looks: undo it by hand, then cancel the run, or fix the "
        "cause and resume it (the compensations already confirmed do not run again).",
        run_id=run.run_id,
        key=key,
    )
