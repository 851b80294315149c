"""How a drive ends: each error a drive raises is final (``failed``) or waits for a decision (``blocked``).

The driver asks ``classify`` what an error means, then records it:
``failed`` as a ``run.failed`` event in the run's log (so every surface
reads the same end), ``blocked`` in the run's control record with the
reason and the error. ``fixes`` gives the exact ``little`` commands that
move such a run again; the handle, ``status_detail()``, ``little doctor``
and the inspector all show those.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ..engine import (
    RunContext,
    WorldCore,
    error_type,
    final_failure,
    rebuild_error,
    record_run_failed,
    recover_log,
)
from ..errors import (
    BudgetExhaustedError,
    CompensationFailedError,
    NondeterminismError,
    RunBlockedError,
    UnknownCommitError,
)
from ..events import RUN_STARTED
from ..security import open_control, seal_control

UNKNOWN_COMMIT = "unknown_commit"
NONDETERMINISM = "nondeterminism"
RECOVERY_EXHAUSTED = "recovery_exhausted"
BUDGET = "budget"
COMPENSATION_FAILED = "compensation_failed"
REASONS = (UNKNOWN_COMMIT, NONDETERMINISM, RECOVERY_EXHAUSTED, BUDGET, COMPENSATION_FAILED)
"""Every reason a run is ``blocked``."""

FAILED, BLOCKED, CUT = "failed", "blocked", "cut"

FIRST = {
    NONDETERMINISM: "after deploying code that matches the log",
    RECOVERY_EXHAUSTED: "after fixing what kills its drives (its worker's memory, a crashing library)",
    COMPENSATION_FAILED: "after undoing the call by hand (then cancel) or fixing the cause (then resume)",
}
"""What to do before a blocked run's fixes, by reason (for the others the decision is all)."""


def classify(exc: BaseException) -> tuple[str, str | None]:
    """What an error that ended a drive means: ``(FAILED, None)``, ``(BLOCKED, reason)`` or ``(CUT, None)``.

    ``CUT``: nothing about the run is wrong, the drive was (a store that
    could not be written now); the next recovery tries again, and the
    drive counts against ``max_recovery_attempts``.
    """
    if isinstance(exc, UnknownCommitError):
        return BLOCKED, UNKNOWN_COMMIT
    if isinstance(exc, NondeterminismError):
        return BLOCKED, NONDETERMINISM
    if isinstance(exc, BudgetExhaustedError):
        return BLOCKED, BUDGET
    if isinstance(exc, CompensationFailedError):
        return BLOCKED, COMPENSATION_FAILED
    return (FAILED, None) if final_failure(exc) else (CUT, None)


def record_failed(world: WorldCore, run_id: str, exc: BaseException) -> bool:
    """Append ``run.failed`` for ``exc`` to a run without an outcome; the caller holds its lock.

    The drive that raised ``exc`` ran the compensations of the run's confirmed
    calls before it let the failure out (``engine.final_failure``); the end
    names those the log confirms. A process killed in between leaves a run
    without an end: it is recovered, replays to the same failure, finds the
    compensations confirmed, and comes back here.

    Returns whether it wrote (``False``: the run has an outcome already, or never started).
    """
    token = world.log.fence(run_id)
    rec = recover_log(world.log, run_id)
    if rec.started is None or rec.terminal is not None:
        return False
    record_run_failed(RunContext(world, run_id, token, rec, {}), exc)  # the drive ran the compensations
    return True


def blocked_fields(
    run_id: str, reason: str, exc: BaseException | None, *, code: str | None = None
) -> dict[str, Any]:
    """Why ``run_id`` is blocked: the reason, and the error's type, message and key.

    ``code``: the manifest hash of the code a ``nondeterminism`` run was recorded with,
    when other code met the divergence and no live worker runs the run's code.
    ``run_id`` of the result: the child run that holds the call at ``key``, when the
    error was met in one (a call is resolved in the run whose log holds it).
    """
    out: dict[str, Any] = {"reason": reason}
    if code is not None:
        out["code"] = code
    if exc is not None:
        out["error_type"] = error_type(exc)
        out["error_message"] = str(exc)
        key = getattr(exc, "key", None) or getattr(exc, "path", None)
        if key is not None:
            out["key"] = key
        holder = getattr(exc, "run_id", None)
        if key is not None and isinstance(holder, str) and holder != run_id:
            out["run_id"] = holder
    return out


def blocked_text(
    world: WorldCore, run_id: str, reason: str, exc: BaseException | None, *, code: str | None = None
) -> str:
    """What a blocked record keeps (``ControlRecord.blocked``): ``blocked_fields`` as JSON.

    The error's message can hold the values of the run (an exception's text),
    so an encrypted world seals it, bound to the run id; the reason, the
    error's type and the call's key are names, and stay readable.
    """
    out = blocked_fields(run_id, reason, exc, code=code)
    if "error_message" in out:
        out["error_message"] = seal_control(world.codec, "error", run_id, out["error_message"])
    return json.dumps(out)


def blocked_data(world: WorldCore, run_id: str, text: str | None) -> dict[str, Any]:
    """``blocked_text`` read back (an unreadable one as ``recovery_exhausted`` with no error).

    Raises:
        CodecError: The error's message is sealed and does not decrypt in this world.
    """
    try:
        data = json.loads(text or "")
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"reason": RECOVERY_EXHAUSTED}
    message = data.get("error_message")
    if isinstance(message, str):
        what = f"the error of blocked run {run_id!r}"
        data["error_message"] = open_control(world.codec, "error", run_id, message, what)
    return data


def cause_of(run_id: str, data: dict[str, Any]) -> BaseException | None:
    """The error a blocked or failed run recorded, rebuilt as its type where that is safe."""
    if not data.get("error_type"):
        return None
    return rebuild_error(
        data["error_type"],
        data.get("error_message") or "",
        run_id=run_id,
        path=data.get("key") or data.get("path"),
    )


def where_args(world: WorldCore) -> str:
    """The options of ``little`` that open this world (empty for the default data directory)."""
    if world.data_dir is not None:
        if Path(world.data_dir).resolve() == (Path.cwd() / ".little-workflow").resolve():
            return ""
        return f" --data-dir {shlex.quote(str(world.data_dir))}"
    db = getattr(world, "db", None)
    schema = getattr(db, "schema", "durable")
    return "" if schema == "durable" else f" --schema {shlex.quote(schema)}"


def workflow_target(world: WorldCore, run_id: str) -> str | None:
    """``MODULE:FUNCTION`` of the run's workflow, as its manifest names the code (``None``: unknown)."""
    first = next(iter(world.log.iter_rows(run_id)), None)
    if first is None or first[1] != RUN_STARTED:
        return None
    qualname = ((json.loads(first[2]).get("manifest") or {}).get("workflow") or {}).get("qualname")
    if not isinstance(qualname, str) or "." not in qualname or "<" in qualname:
        return None
    module, _, fn = qualname.rpartition(".")
    return None if module == "__main__" else f"{module}:{fn}"


def fixes(
    world: WorldCore, run_id: str, status: str, data: dict[str, Any], queue: str | None = None
) -> list[str]:
    """The commands that move a ``blocked``, ``failed`` or ``interrupted`` run again (``data``: why).

    A command that needs the workflow's code in the ``little`` process (the
    return type of a resolved tool, or driving a run that has no queue) names
    it with ``--workflow``, as the run's manifest records it.
    """
    if status not in ("interrupted", "failed", "blocked"):
        return []
    w, rid = where_args(world), shlex.quote(run_id)
    target = workflow_target(world, run_id)
    code = f" --workflow {shlex.quote(target)}" if target is not None else ""
    here = code if queue is None else ""  # a queued run goes back on its queue instead
    cancel = f"little cancel {rid}{w}"
    if status == "interrupted":
        if data.get("reason"):  # a cancellation is pending: an answer does not take it back
            return [f"little cancel {rid}{code}{w}"]
        return [f"little answer {rid} JSON{here}{w}", cancel]
    if status == "failed":
        drift = data.get("drift_keys") or []
        if drift:
            keys = " ".join(shlex.quote(k) for k in drift)
            return [f"little resume {rid} --accept-drift {keys}{here}{w}"]
        return [f"little resume {rid}{here}{w}"]
    reason = data.get("reason")
    # A call is resolved in the run whose log holds it: a child run's, when it was met in one
    # (the run's code, named by --workflow, reaches the child's); the run itself then goes on.
    holder = shlex.quote(str(data.get("run_id") or run_id))
    if reason == UNKNOWN_COMMIT and data.get("key"):
        key = shlex.quote(str(data["key"]))
        return [
            f"little resolve {holder} {key} --happened --result JSON{code}{w}",
            f"little resolve {holder} {key} --not-happened{here}{w}",
            cancel,
        ]
    if reason == BUDGET:
        return [f"little resume {rid} --budget JSON{here}{w}", cancel]
    if reason == COMPENSATION_FAILED and data.get("key"):  # resumed, it is called again
        key = shlex.quote(str(data["key"]))
        done_by_hand = f"little resolve {holder} {key} --happened --result JSON{code}{w}"
        return [f"little resume {rid}{here}{w}", done_by_hand]
    if reason == NONDETERMINISM and data.get("code") and target is not None:
        # Recorded by other code than the worker's that met it: a worker of that code first.
        q = f" --queue {shlex.quote(queue)}" if queue else ""
        return [f"little worker {shlex.quote(target)}{q}{w}", f"little resume {rid}{here}{w}", cancel]
    return [f"little resume {rid}{here}{w}", cancel]


def _in(data: dict[str, Any]) -> str:
    """`` in child run 'ID'`` when the blocking call is in a child run, else nothing."""
    return f" in child run {data['run_id']!r}" if data.get("run_id") else ""


def blocked_error(
    world: WorldCore, run_id: str, data: dict[str, Any], queue: str | None = None
) -> RunBlockedError:
    """The ``RunBlockedError`` of a blocked run (``data``: its record's ``blocked``; ``queue``: its queue)."""
    reason = str(data.get("reason") or RECOVERY_EXHAUSTED)
    how = fixes(world, run_id, "blocked", data, queue)
    said = {
        UNKNOWN_COMMIT: (
            f"a plain tool (key {data.get('key')!r}{_in(data)}) was in flight when its driver died"
        ),
        NONDETERMINISM: "the code reached a call the log does not match",
        RECOVERY_EXHAUSTED: "its drives were cut (its worker died) more often than max_recovery_attempts",
        BUDGET: "its budget is spent",
        COMPENSATION_FAILED: f"the compensation {data.get('key')!r}{_in(data)} failed for good",
    }.get(reason, reason)
    if reason == NONDETERMINISM and data.get("code"):
        said += (
            f"; the run was recorded by code matching {data['code'][:19]}, which no live worker runs: "
            "start a worker with that code, then resume the run"
        )
    error = f" ({data['error_type'].rsplit('.', 1)[-1]})" if data.get("error_type") else ""
    first = f", {FIRST[reason]}," if reason in FIRST else ""
    return RunBlockedError(
        f"run {run_id!r} is blocked ({reason}): {said}{error}. Unblock it{first} with: " + "; or ".join(how),
        run_id=run_id,
        reason=reason,
        cause=cause_of(run_id, data),
        fixes=how,
    )
