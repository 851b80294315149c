"""The runtime: background runs with handles, workers, queues, recovery, cancellation, deadlines.

The engine core does not import this package; it imports the core. Its
durable state (queues, claims, cancellation requests, dedup ids) lives in the
world's control store (``durable.store.RunControl``).
"""

from __future__ import annotations

from ._doctor import Finding, doctor
from ._handle import RunHandle, cancel_run, handle
from ._outbox import DEFAULT_POLICY, OutboxDispatcher, dispatch_outbox
from ._queue import Queue
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
from ._start import recover_runs, resume_run, start_workflow
from ._status import STATUSES, RunStatus, run_status
from ._talk import send
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
    "schedule_pass",
    "schedules_of",
    "send",
    "start_workflow",
    "tick_id",
    "ticks",
]
