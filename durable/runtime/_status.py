"""A run's status, read from its log and the control store (``run_status``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..engine import WorldCore, outcome_of, run_not_found
from ..events import RUN_CANCELLED, RUN_FAILED
from ..store import ControlRecord, RunInfo
from ._driver import control_of
from ._outcome import blocked_data, fixes
from ._serving import WAITING_FOR_CODE, Waiting, waiting_fixes

STATUSES = ("enqueued", "running", "interrupted", "blocked", "completed", "failed", "cancelled")
"""Every status a run reports."""


@dataclass(frozen=True)
class RunStatus:
    """A run's status with the detail the runtime knows.

    Attributes:
        status: One of ``enqueued``, ``running``, ``interrupted``, ``blocked``, ``completed``,
            ``failed``, ``cancelled``.
        reason: Why a cancelled run (or one asked to cancel) stops: ``requested`` or ``deadline``;
            why a blocked run waits: ``unknown_commit``, ``nondeterminism``,
            ``recovery_exhausted``, ``budget`` or ``compensation_failed``; ``waiting_for_code``
            for a run that no worker drives because their code cannot replay it (see ``detail``).
        queue: Its queue, when it has one.
        owner: The driver that claimed it.
        pid: The driver's process id, when known.
        host: The driver's host, when known.
        error: The error of a failed or blocked run (``error_type``, ``error_message``,
            and ``key`` or ``path`` when it names one; ``run_id`` when the blocking call
            is in a child run, whose log holds it), else ``None``.
        fixes: The exact commands that move a blocked, failed or interrupted run again.
        drives: Drives begun since the run's last recorded outcome (cut ones stay counted).
        compensated: The compensations a failed or cancelled run ran before it ended
            (``compensate:<key>``, newest call first); empty when none.
        detail: What a run waits for, in words: ``waiting for code matching sha256:…`` for a
            run that no worker whose code can replay it drives (reason ``waiting_for_code``).
    """

    status: str
    reason: str | None = None
    queue: str | None = None
    owner: str | None = None
    pid: int | None = None
    host: str | None = None
    error: dict[str, Any] | None = None
    fixes: list[str] = field(default_factory=list)
    drives: int = 0
    compensated: list[str] = field(default_factory=list)
    detail: str | None = None


def run_status(world: WorldCore, run_id: str) -> RunStatus:
    """The status of a run from the log and the control store.

    Raises:
        RunNotFoundError: Neither knows the run.
    """
    ctl = control_of(world)
    both = getattr(ctl, "read_with_info", None)  # a store that reads both in one query (Postgres)
    info, rec = both(run_id) if both is not None else (world.log.info(run_id), ctl.get(run_id))
    if info is None and (rec is None or not rec.workflow):
        raise run_not_found(world, run_id)
    return status_of(world, run_id, info, rec)


def reconciled(logged: str | None, rec: ControlRecord | None) -> str:
    """A run's status from its log's status (``None``: never started) and its control record.

    The one reconciliation of the two: a run the runtime moved again (resumed,
    blocked, put back on its queue) reports what the control record says
    until its log catches up; a run that never started reports its record's state.
    """
    if logged is None:
        assert rec is not None
        return {"claimed": "running", "done": "failed"}.get(rec.state, rec.state)
    if rec is not None and rec.resume == logged and rec.state in ("enqueued", "claimed"):
        return "enqueued" if rec.state == "enqueued" else "running"  # resume_run asked
    if rec is not None and rec.state == "blocked" and logged in ("running", "interrupted"):
        return "blocked"  # an interrupted run blocks when the drive that cancels it cannot undo it
    if rec is not None and rec.state == "enqueued" and logged == "running":
        return "enqueued"  # answered or resolved: back on its queue
    return logged


def status_of(world: WorldCore, run_id: str, info: RunInfo | None, rec: ControlRecord | None) -> RunStatus:
    """``run_status`` from what the caller read already (``little runs`` reads many runs at once).

    The one source of a run's status and reason: a cancelled run's reason is
    the one its ``run.cancelled`` event records (a child cancelled by its
    parent's driver has no control record that could say it), a pending
    cancellation's the one its control record holds.
    """
    error: dict[str, Any] | None = None
    status = reconciled(None if info is None else info.status, rec)
    reason = None
    why: dict[str, Any] = {}
    compensated: list[str] = []
    if status == "cancelled":
        if info is not None:
            reason, compensated = _cancelled(world, run_id)
        else:
            reason = rec.cancel_reason if rec else None
    elif status == "blocked":
        assert rec is not None
        why = blocked_data(world, run_id, rec.blocked)
        reason = why.get("reason")
        error = {k: why[k] for k in ("error_type", "error_message", "key", "run_id") if k in why} or None
    elif status == "failed" and info is not None:
        terminal = outcome_of(world.log, run_id)  # its last row, not the whole log
        if terminal is not None and terminal[0] == RUN_FAILED:
            why = terminal[1]
            error = {k: why[k] for k in ("error_type", "error_message", "path") if why.get(k) is not None}
            compensated = list(why.get("compensated") or [])
    elif rec is not None and rec.state == "waiting" and status in ("running", "interrupted", "enqueued"):
        waiting = Waiting.of(rec)
        return RunStatus(
            status,
            rec.cancel_reason or WAITING_FOR_CODE,
            rec.queue,
            drives=rec.drives,
            fixes=waiting_fixes(world, run_id, waiting),
            detail=waiting.detail(),
        )
    elif rec is not None:
        reason = rec.cancel_reason
    how = fixes(world, run_id, status, {**why, "reason": reason}, rec.queue if rec is not None else None)
    if rec is None:
        return RunStatus(status, reason, error=error, fixes=how, compensated=compensated)
    return RunStatus(
        status, reason or None, rec.queue, rec.owner, rec.pid, rec.host, error, how, rec.drives, compensated
    )


def _cancelled(world: WorldCore, run_id: str) -> tuple[str | None, list[str]]:
    """A cancelled run's reason and the compensations it ran, from its ``run.cancelled``."""
    terminal = outcome_of(world.log, run_id)  # its last row, not the whole log
    if terminal is None or terminal[0] != RUN_CANCELLED:
        return None, []
    return terminal[1].get("reason"), list(terminal[1].get("compensated") or [])
