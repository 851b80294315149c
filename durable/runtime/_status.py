"""A run's status, read from its log and the control store (``run_status``)."""

from __future__ import annotations

from dataclasses import dataclass

from .._recovery import recover_log
from .._world import WorldCore
from ..errors import RunNotFoundError
from ..store._control import ControlRecord
from ..store._protocol import RunInfo
from ._driver import control_of

STATUSES = ("enqueued", "running", "interrupted", "completed", "failed", "cancelled")
"""Every status a run reports."""


@dataclass(frozen=True)
class RunStatus:
    """A run's status with the detail the runtime knows.

    Attributes:
        status: One of ``enqueued``, ``running``, ``interrupted``, ``completed``,
            ``failed``, ``cancelled``.
        reason: Why a cancelled run (or one asked to cancel) stops: ``requested`` or ``deadline``.
        queue: Its queue, when it has one.
        owner: The driver that claimed it.
        pid: The driver's process id, when known.
        host: The driver's host, when known.
    """

    status: str
    reason: str | None = None
    queue: str | None = None
    owner: str | None = None
    pid: int | None = None
    host: str | None = None


def run_status(world: WorldCore, run_id: str) -> RunStatus:
    """The status of a run from the log and the control store.

    Raises:
        RunNotFoundError: Neither knows the run.
    """
    info = world.log.info(run_id)
    rec = control_of(world).get(run_id)
    if info is None and (rec is None or not rec.workflow):
        raise RunNotFoundError(
            f"no run {run_id!r} in {world._where()}; list runs with `little runs`.", run_id=run_id
        )
    return status_of(world, run_id, info, rec)


def status_of(world: WorldCore, run_id: str, info: RunInfo | None, rec: ControlRecord | None) -> RunStatus:
    """``run_status`` from what the caller read already (``little runs`` reads many runs at once).

    The one source of a run's status and reason: a cancelled run's reason is
    the one its ``run.cancelled`` event records (a child cancelled by its
    parent's driver has no control record that could say it), a pending
    cancellation's the one its control record holds.
    """
    if info is not None:
        status = info.status
        if rec is not None and rec.resume == status and rec.state in ("enqueued", "claimed"):
            status = "enqueued" if rec.state == "enqueued" else "running"  # resume_run asked
    else:
        assert rec is not None
        status = {"claimed": "running", "done": "failed"}.get(rec.state, rec.state)
    reason = None
    if status == "cancelled":
        reason = _cancel_reason(world, run_id) if info is not None else (rec.cancel_reason if rec else None)
    elif rec is not None:
        reason = rec.cancel_reason
    if rec is None:
        return RunStatus(status, reason)
    return RunStatus(status, reason or None, rec.queue, rec.owner, rec.pid, rec.host)


def _cancel_reason(world: WorldCore, run_id: str) -> str | None:
    terminal = recover_log(world.log, run_id).terminal
    return terminal[1].get("reason") if terminal is not None and terminal[0] == "run.cancelled" else None
