"""Pure replay decisions: what the recorded log says about one attempted call.

Every kind of durable call asks one of these functions, with what the log
recorded at the call's key and at its position in the scope, and with what
the code attempts now. The answer is an ``Action``:

| recorded at the key | attempted the same? | action |
|---|---|---|
| nothing, nothing at the position | - | ``EXECUTE`` |
| nothing, another call at the position | - | raise ``NondeterminismError`` |
| an outcome (step output, receipt, value) | yes | ``REPLAY`` it |
| a final failure (``step.failed``, error receipt) | yes | ``FAIL``: re-raise it |
| an effect's intent, no receipt | yes | ``REDRIVE``, ``RECONCILE`` or raise ``UnknownCommitError`` (1) |
| a fork's inherited record | input differs | ``RERUN``: forget it and execute |
| anything | no | raise ``NondeterminismError`` |

(1) ``REDRIVE`` a read (model call, child run) or an ``idempotent=True``
tool, ``RECONCILE`` a tool with ``reconcile=``; any other tool may have
acted, and calling it again could repeat a side effect.

Nothing here reads the log, writes an event, changes the index or touches
a scope: the sequence that does (``_claim``) turns the answer into events.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from ..errors import NondeterminismError, UnknownCommitError
from ._keys import Call as Call  # the identity every decision compares
from ._values import matches

if TYPE_CHECKING:
    from ._rebind import SignatureChange
    from ._recorded import Recorded

Json = dict[str, Any]


class Action(Enum):
    """What to do with one attempted call."""

    EXECUTE = "execute"
    """Nothing was recorded: run the call and record it."""
    REPLAY = "replay"
    """The outcome is recorded: return it without running anything."""
    FAIL = "fail"
    """A final failure is recorded: raise it again without running anything."""
    REDRIVE = "redrive"
    """An effect started and was never confirmed, and calling it again is safe."""
    RECONCILE = "reconcile"
    """An effect started and was never confirmed: ask its ``reconcile=`` function first."""
    RERUN = "rerun"
    """A fork inherited this call, but its input changed: forget it and execute."""


EXECUTE, REPLAY, FAIL, REDRIVE, RECONCILE, RERUN = (
    Action.EXECUTE,
    Action.REPLAY,
    Action.FAIL,
    Action.REDRIVE,
    Action.RECONCILE,
    Action.RERUN,
)


def mismatch(
    run_id: str, where: str, recorded: Call, attempted: Call, signature: SignatureChange | None = None
) -> NondeterminismError:
    """The error for a call that differs from the one the log recorded at the same place.

    ``signature``: the earlier signatures of the called function in this run, when it
    has any; a changed input is then laid to the changed signature, not to the clock.
    """
    same_call = (
        recorded.key == attempted.key and recorded.kind == attempted.kind and recorded.name == attempted.name
    )
    if same_call and signature is not None:
        advice = signature.why(f"{attempted.kind} {attempted.name!r}")
    elif same_call:
        advice = (
            "The code is the same, but the call's arguments differ from the recorded ones: an "
            "argument computed from the clock, randomness or the environment changes on every "
            "run. Pass such values through durable.now(), durable.uuid4() or durable.random(), "
            "which replay what they returned, or start a new run id."
        )
    else:
        advice = "Restore the code the run was started with and resume, or start a new run id."
    return NondeterminismError(
        f"run {run_id!r}: the code made a different durable call at {where} than the log "
        f"recorded.\n  recorded:  {recorded.kind} {recorded.name!r} at {recorded.key!r} "
        f"(input {recorded.input_hash[:12]})\n"
        f"  attempted: {attempted.kind} {attempted.name!r} at {attempted.key!r} "
        f"(input {attempted.input_hash[:12]})\n{advice}",
        run_id=run_id,
        path=attempted.key,
        recorded=recorded._asdict() | {"path": recorded.key},
        attempted=attempted._asdict() | {"path": attempted.key},
    )


def check_position(run_id: str, scope: str, n: int, recorded: Call | None, attempted: Call) -> None:
    """Raise unless the call recorded as the ``n``-th of ``scope`` is the attempted one.

    Only kind, name and key are compared: a changed input at the same key is
    found by the decision of that key.
    """
    if recorded is not None and (
        recorded.kind != attempted.kind or recorded.name != attempted.name or recorded.key != attempted.key
    ):
        raise mismatch(run_id, f"position {n} of scope {scope or '<workflow>'!r}", recorded, attempted)


def _same_input(recorded: Json, attempted: Call, input_data: Any) -> bool:
    rh = recorded["input_hash"]
    return rh == attempted.input_hash or matches(rh, input_data, attempted.input_hash)


def decide_step(
    rec: Recorded,
    run_id: str,
    name: str,
    input_hash: str,
    path: str,
    input_data: Any,
    signature: SignatureChange | None = None,
) -> tuple[Action, Json | None]:
    """What a step call does, given what the run's index holds at its path; with that record.

    The record is the completion for ``REPLAY``, the final failure for
    ``FAIL``, else ``None``. The position check is the caller's
    (``Claim.execute``), made only when this does not replay or fail: a
    recorded step is identified by its path.

    Args:
        rec: The run's index (only read): the start, completion and final failure at the path.
        run_id: The run, for errors.
        name: The step's name.
        input_hash: The hash of the attempted input.
        path: The step's path.
        input_data: The attempted input as JSON (for hashes of older formats).
        signature: The step's earlier signatures in this run (for the error), if any.

    Raises:
        NondeterminismError: The step at this path was recorded with another input.
    """
    completed = rec.steps_completed.get(path)
    started = rec.steps_started.get(path)
    if started is not None:
        rh = started["input_hash"]
        if rh == input_hash:  # the most frequent case first: a replayed step
            if completed is not None:
                return REPLAY, completed
        elif not matches(rh, input_data, input_hash):
            if started.get("inherited"):
                return RERUN, None
            raise mismatch(
                run_id,
                f"step {path!r}",
                Call("step", name, rh, path),
                Call("step", name, input_hash, path),
                signature,
            )
    if completed is not None:
        return REPLAY, completed
    failed = rec.steps_failed.get(path)
    if failed is not None:
        return FAIL, failed
    return EXECUTE, None


def decide_effect(
    run_id: str,
    attempted: Call,
    input_data: Any,
    intent: Json | None,
    receipt: Json | None,
    *,
    redrivable: bool,
    reconcilable: bool,
    signature: SignatureChange | None = None,
) -> Action:
    """What an effect call does, given its key's recorded intent and receipt.

    Args:
        run_id: The run, for errors.
        attempted: The call the code makes now.
        input_data: The attempted input as JSON (for hashes of the previous format).
        intent: The recorded ``effect.intent`` at the key, if any.
        receipt: The recorded ``effect.receipt`` at the key, if any.
        redrivable: Calling it again with the same key is safe (a model call,
            a child workflow, an ``idempotent=True`` tool).
        reconcilable: The tool has a ``reconcile=`` function.
        signature: The effect's earlier signatures in this run (for the error), if any.

    Raises:
        NondeterminismError: Another effect or another input was recorded at the key.
        UnknownCommitError: The effect may have happened, and nothing makes calling it again safe.
    """
    if intent is not None and (
        intent["name"] != attempted.name or not _same_input(intent, attempted, input_data)
    ):
        if intent.get("inherited") and intent["name"] == attempted.name:
            return RERUN
        raise mismatch(
            run_id,
            f"effect {attempted.key!r}",
            Call(intent["kind"], intent["name"], intent["input_hash"], attempted.key),
            attempted,
            signature,
        )
    if receipt is not None:
        return REPLAY if receipt["outcome"] == "ok" else FAIL
    if intent is None:
        return EXECUTE
    if redrivable:
        return REDRIVE
    if reconcilable:
        return RECONCILE
    key = attempted.key
    raise UnknownCommitError(
        f"run {run_id!r}: tool {attempted.name!r} (key {key!r}) was started before the crash and "
        "never confirmed, so it may or may not have happened. It is not idempotent and has no "
        "reconcile=, so durable will not call it again on its own. Check the external system for "
        f"idempotency key {run_id}:{key}, then record what you found: "
        f"durable.handle({run_id!r}, world=...).resolve({key!r}, happened=True, result=...) "
        "(or happened=False to call it again with the same key), from the shell "
        f"`little resolve {run_id} '{key}' --happened --result JSON` or `--not-happened`. Or make "
        "calling it again safe (idempotent=True, or a reconcile= function) and resume with the "
        "accept_drift=[...] keys that resume's CapabilityDriftError lists.",
        run_id=run_id,
        key=key,
    )


def decide_value(recorded: Json | None) -> Action:
    """What a recorded value, durable sleep, interrupt answer or session does.

    The position check is the caller's, made only when this returns ``EXECUTE``.
    """
    return EXECUTE if recorded is None else REPLAY
