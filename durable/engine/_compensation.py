"""Compensation: the ``compensate=`` tools of a run's confirmed calls, run when it fails or is cancelled.

What to undo is read from the log: every confirmed call of a tool with
``compensate=`` (its intent records its arguments, its receipt its result),
wherever it was made (the workflow body, a step, a branch, an agent
session; a sync tool or an async one), in the order the calls were
confirmed. A drive that replays a step whole, without running its body,
still undoes the calls made inside it. When the run fails for good or is
cancelled, ``compensate`` calls each ``undo`` newest first, before the run's
end is recorded, with the call's recorded arguments and ``result=`` its
recorded result; each is a durable effect of its own keyed
``compensate:<original key>`` (an intent, then a receipt), so a crash in the
middle leaves a run that is recovered, fails (or is cancelled) again the
same way on replay, and goes on with the compensations not yet confirmed: a
confirmed one never runs twice (nor one a person resolved as happened), one
cut mid-call is re-driven only if ``undo`` is idempotent or reconcilable
(otherwise the run is blocked with ``UnknownCommitError``), and one that
fails for good (after its ``retry=``) raises ``CompensationFailedError``,
which leaves the run ``blocked`` with the failing key.
"""

from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any

from ..errors import ArtifactIntegrityError, CompensationFailedError, UnknownCommitError
from ..events import EFFECT_INTENT, EFFECT_RECEIPT
from . import _event_writer as ev
from ._attempts import Attempts
from ._call_inputs import effect_input, recorded_input
from ._capabilities import reachable
from ._context import EFFECT_KEY
from ._failures import error_data, recordable
from ._keys import COMPENSATE, idempotency_key
from ._manifest import run_manifest
from ._spec import NEVER_HAPPENED, Spec, spec_of
from ._values import stored_bytes, to_json

if TYPE_CHECKING:
    from ._context import RunContext
    from ._recorded import Recorded


def note_undoable(run: RunContext, spec: Spec) -> None:
    """Note a tool with ``compensate=`` that this drive calls (executed or replayed, sync or async).

    The log says which calls to undo; this says where their code is when the
    workflow's code does not show it (a tool reached through an object built
    at run time, or offered to an agent session).
    """
    if run.undoable is None:
        run.undoable = {}
    run.undoable[spec.name] = spec


def _undos(rec: Recorded) -> dict[str, str]:
    """The undo's name of each tool the run's manifests (its own, its sessions') record with one."""
    described = list((((rec.started or {}).get("manifest") or {}).get("tools") or {}).values())
    for session in rec.sessions.values():
        described += (session.get("manifest") or {}).get("availableTools") or []
    return {
        str(d.get("name")): undo
        for d in described
        if isinstance(d, dict) and isinstance(undo := (d.get("options") or {}).get("compensate"), str)
    }


def undoable_names(rec: Recorded) -> set[str]:
    """The tools the run's manifests (its own, its agent sessions') record with ``compensate=``."""
    return set(_undos(rec))


def compensated_keys(receipts: dict[str, Any]) -> list[str]:
    """The compensations a run's receipts confirm, as ``compensate:<key>``."""
    return [k for k, r in receipts.items() if k.startswith(COMPENSATE) and r.get("outcome") == "ok"]


def _confirmed_calls(rec: Recorded, names: set[str] | dict[str, Spec]) -> list[str]:
    """The keys of the confirmed calls of the tools ``names``, in the order they were confirmed."""
    return [
        key
        for key, r in rec.receipts.items()
        if r.get("outcome") == "ok"
        and not key.startswith(COMPENSATE)
        and (intent := rec.intents.get(key)) is not None
        and intent.get("kind") == "tool"
        and intent.get("name") in names
    ]


def undo_pending(rec: Recorded) -> list[str]:
    """The confirmed calls of ``compensate=`` tools whose compensation is not confirmed, by key.

    Read from the log alone (the run's manifests name each tool's
    ``compensate=``): what a cancellation must undo before the run can end.
    """
    return [
        key
        for key in _confirmed_calls(rec, undoable_names(rec))
        if (rec.receipts.get(COMPENSATE + key) or {}).get("outcome") != "ok"
    ]


def open_compensations(rec: Recorded) -> dict[str, str]:
    """The compensations a person may decide about, by key: the name of the undo tool of each.

    Those of confirmed calls whose undo is not confirmed: cut mid-call, failed
    for good, or not begun (the run waits for a person before it could).
    """
    undos = _undos(rec)
    return {COMPENSATE + key: undos[rec.intents[key]["name"]] for key in undo_pending(rec)}


def _code_undoes(workflow: Spec) -> bool:
    """Whether the workflow's code reaches a tool with ``compensate=`` (its manifest, computed once)."""
    tools = run_manifest(workflow, {}).get("tools") or {}
    return any((d.get("options") or {}).get("compensate") for d in tools.values())


async def compensate(run: RunContext, workflow: Spec) -> list[str]:
    """Run the compensation of every confirmed call the log holds, newest first; their keys.

    Those confirmed before (by an earlier drive, or a person's decision) do
    not run again, and are listed too.

    Raises:
        CompensationFailedError: A compensation failed for good (its receipt records the error), or
            cannot be made (its tool's code or its call's arguments cannot be found).
        UnknownCommitError: A plain ``undo`` was cut mid-call by an earlier crash.
    """
    if not (run.undoable or undoable_names(run.recorded) or _code_undoes(workflow)):
        return []
    run.flush()  # this drive's confirmed calls are in the log, and read back with the others
    rec = run.recorded.update(run.log.read(run.run_id, run.recorded.last_seq), run.run_id)
    tools = {s.name: s for s in reachable(workflow) if s.kind == "tool" and s.compensate is not None}
    tools.update(run.undoable or {})
    todo = list(reversed(_confirmed_calls(rec, tools.keys() | undoable_names(rec))))
    guard, run.guard = run.guard, None  # a cancellation is what started them: they run to the end
    try:
        for key in todo:
            await _one(run, tools.get(rec.intents[key]["name"]), key)
    finally:
        run.guard = guard
    return [COMPENSATE + key for key in todo]


def _call_of(run: RunContext, tool: Spec | None, key: str) -> tuple[Spec, dict[str, Any]]:
    """The undo of the call at ``key`` and its keyword arguments: the call's own, and ``result=``."""
    rec, rid = run.recorded, run.run_id
    name = rec.intents[key]["name"]
    if tool is None:
        raise _failed(
            run,
            COMPENSATE + key,
            f"the code of tool {name!r}, which the run recorded with compensate=, is not reachable "
            "from its workflow, so its undo cannot be called; declare it with "
            f"@workflow(uses=[{name}]) and resume the run",
        )
    undo = spec_of(tool.compensate)
    assert undo is not None  # checked at decoration
    try:
        data = effect_input(run.world, rec, key, rid)
    except (ArtifactIntegrityError, ValueError) as exc:
        raise _failed(run, COMPENSATE + key, f"the arguments of {key!r} cannot be read back: {exc}") from exc
    if data is None:
        raise _failed(
            run,
            COMPENSATE + key,
            f"the log does not record the arguments of {key!r} (it was written by an older "
            f"version of durable), so {undo.name!r} cannot be called with them",
        )
    return undo, {**tool.load_input(data), "result": tool.rebuild(rec.receipts[key]["result"])}


async def _one(run: RunContext, tool: Spec | None, original: str) -> None:
    key = COMPENSATE + original
    rec = run.recorded
    receipt = rec.receipts.get(key)
    if receipt is not None and receipt.get("outcome") == "ok":
        return  # confirmed by an earlier drive, or resolved as happened: never twice
    # A recorded failure did not undo anything: a drive after a person's decision tries again.
    spec, kwargs = _call_of(run, tool, original)
    inp, raw, ih = spec.dump_input((), kwargs, run.run_id, key)
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
            out = spec.fn(**kwargs)
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
            raise _failed(run, key, f"{type(exc).__qualname__}: {exc}") from exc
        finally:
            EFFECT_KEY.reset(token)
        _confirm(run, spec, key, out, t0)
        await run.flush_async()  # confirmed before the next one starts
        return


def _confirm(run: RunContext, spec: Spec, key: str, out: Any, t0: float) -> None:
    data = to_json(spec.out, out, what="the result", run_id=run.run_id, path=key)
    stored_bytes(data, what="the result", run_id=run.run_id, path=key)
    run.emit(EFFECT_RECEIPT, ev.receipt_ok(key, data, ev.elapsed_ms(t0)))


def _failed(run: RunContext, key: str, why: str) -> CompensationFailedError:
    rid = run.run_id
    return CompensationFailedError(
        f"the compensation {key!r} of run {rid!r} failed for good ({why}); the run is blocked "
        "until a person looks: fix the cause and resume it (`little resume`), which calls it "
        "again, or undo it by hand and record that with `little resolve "
        f"{rid} {key} --happened` (the compensations already confirmed do not run again).",
        run_id=rid,
        key=key,
    )
