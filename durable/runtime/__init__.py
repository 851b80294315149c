"""The runtime: background runs with handles, workers, queues, recovery, cancellation, deadlines.

The engine core does not import this package; it imports the core. Its
durable state (queues, claims, cancellation requests, dedup ids) lives in the
world's control store (``durable.store.RunControl``).
"""

from __future__ import annotations

# The door: what the other parts of the package use (not public API).
from ._detail import iter_runs as iter_runs
from ._detail import list_runs as list_runs
from ._doctor import Finding, doctor
from ._doctor import finding_line as finding_line
from ._driver import HOST as HOST
from ._driver import control_of as control_of
from ._driver import default_driver as default_driver
from ._driver import keeps_control as keeps_control
from ._guard import RunGuard as RunGuard
from ._guard import WorkerStopping as WorkerStopping
from ._handle import RunHandle, cancel_run, handle
from ._handle import driver_of as driver_of
from ._live_workers import live_workers as live_workers
from ._messages import send
from ._outbox import DEFAULT_POLICY, OutboxDispatcher, dispatch_outbox
from ._outcome import BLOCKED as BLOCKED
from ._outcome import FAILED as FAILED
from ._outcome import blocked_error as blocked_error
from ._outcome import blocked_text as blocked_text
from ._outcome import classify as classify
from ._outcome import record_failed as record_failed
from ._queue import Queue
from ._resolve import answer_run as answer_run
from ._resolve import decided_by as decided_by
from ._resolve import resolve_commit as resolve_commit
from ._run_here import run_workflow
from ._schedules import (
    CATCH_UP,
    MISSED_AFTER,
    Schedule,
    ScheduleInfo,
    Schedules,
    schedule_pass,
    schedules_of,
    tick_id,
    ticks,
)
from ._serving import short_hash as short_hash
from ._start import recover_runs, resume_run, start_workflow
from ._status import STATUSES, RunStatus, run_status
from ._worker import Worker

__all__ = [
    "CATCH_UP",
    "DEFAULT_POLICY",
    "MISSED_AFTER",
    "STATUSES",
    "Finding",
    "OutboxDispatcher",
    "Queue",
    "RunHandle",
    "RunStatus",
    "Schedule",
    "ScheduleInfo",
    "Schedules",
    "Worker",
    "cancel_run",
    "dispatch_outbox",
    "doctor",
    "handle",
    "recover_runs",
    "resume_run",
    "run_status",
    "run_workflow",
    "schedule_pass",
    "schedules_of",
    "send",
    "start_workflow",
    "tick_id",
    "ticks",
]
