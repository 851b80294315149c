"""The typed events of a run's log.

Every outcome that must survive a crash is one of these immutable pydantic
models, discriminated by ``type``, with a per-run, gap-free, increasing
``seq``. ``world.events(run_id)`` returns them; ``little events`` prints them.

Example:
    >>> from durable.events import parse_event
    >>> parse_event("r1", 1, "step.started", '{"path":"a","visit":0,"attempt":1,"input_hash":"x"}').path
    'a'
"""

from __future__ import annotations

import json
from typing import Annotated, get_args

from pydantic import Field, TypeAdapter

from ._calls import EffectIntent as EffectIntent
from ._calls import EffectReceipt as EffectReceipt
from ._calls import FanOutStarted as FanOutStarted
from ._calls import InterruptRequested as InterruptRequested
from ._calls import InterruptResumed as InterruptResumed
from ._calls import PatchMarked as PatchMarked
from ._calls import RetryDecision as RetryDecision
from ._calls import SessionCompleted as SessionCompleted
from ._calls import SessionStarted as SessionStarted
from ._calls import StepCompleted as StepCompleted
from ._calls import StepFailed as StepFailed
from ._calls import StepStarted as StepStarted
from ._calls import TimerSet as TimerSet
from ._calls import ValueRecorded as ValueRecorded
from ._messages import EventSet as EventSet
from ._messages import MessageReceived as MessageReceived
from ._messages import MessageSent as MessageSent
from ._messages import MessageWaiting as MessageWaiting
from ._messages import StreamClosed as StreamClosed
from ._messages import StreamCursor as StreamCursor
from ._messages import StreamWrite as StreamWrite
from ._names import BUDGET_SET as BUDGET_SET
from ._names import DRIFT_ACCEPTED as DRIFT_ACCEPTED
from ._names import EFFECT_INTENT as EFFECT_INTENT
from ._names import EFFECT_RECEIPT as EFFECT_RECEIPT
from ._names import EVENT_SET as EVENT_SET
from ._names import FANOUT_STARTED as FANOUT_STARTED
from ._names import INTERRUPT as INTERRUPT
from ._names import INTERRUPT_RESUMED as INTERRUPT_RESUMED
from ._names import LOG_FORMAT_VERSION as LOG_FORMAT_VERSION
from ._names import MESSAGE_RECEIVED as MESSAGE_RECEIVED
from ._names import MESSAGE_SENT as MESSAGE_SENT
from ._names import MESSAGE_WAITING as MESSAGE_WAITING
from ._names import OUTER_LOOP_CYCLE_COMPLETED as OUTER_LOOP_CYCLE_COMPLETED
from ._names import PATCH_MARKED as PATCH_MARKED
from ._names import RETRY_DECISION as RETRY_DECISION
from ._names import RUN_CANCELLED as RUN_CANCELLED
from ._names import RUN_COMPLETED as RUN_COMPLETED
from ._names import RUN_FAILED as RUN_FAILED
from ._names import RUN_INTERRUPTED as RUN_INTERRUPTED
from ._names import RUN_RESOLVED as RUN_RESOLVED
from ._names import RUN_RESTORED as RUN_RESTORED
from ._names import RUN_RESUMED as RUN_RESUMED
from ._names import RUN_RETRIED as RUN_RETRIED
from ._names import RUN_STARTED as RUN_STARTED
from ._names import SESSION_COMPLETED as SESSION_COMPLETED
from ._names import SESSION_STARTED as SESSION_STARTED
from ._names import SNAPSHOT as SNAPSHOT
from ._names import STEP_COMPLETED as STEP_COMPLETED
from ._names import STEP_FAILED as STEP_FAILED
from ._names import STEP_STARTED as STEP_STARTED
from ._names import STREAM_CLOSED as STREAM_CLOSED
from ._names import STREAM_CURSOR as STREAM_CURSOR
from ._names import STREAM_WRITE as STREAM_WRITE
from ._names import TIMER_SET as TIMER_SET
from ._names import VALUE_RECORDED as VALUE_RECORDED
from ._run import BudgetSet as BudgetSet
from ._run import DriftAccepted as DriftAccepted
from ._run import OuterLoopCycleCompleted as OuterLoopCycleCompleted
from ._run import RunCancelledEvent as RunCancelledEvent
from ._run import RunCompleted as RunCompleted
from ._run import RunFailed as RunFailed
from ._run import RunInterruptedEvent as RunInterruptedEvent
from ._run import RunResolved as RunResolved
from ._run import RunRestored as RunRestored
from ._run import RunResumed as RunResumed
from ._run import RunRetried as RunRetried
from ._run import RunStarted as RunStarted
from ._run import Snapshot as Snapshot

__all__ = [
    "BUDGET_SET",
    "DRIFT_ACCEPTED",
    "EFFECT_INTENT",
    "EFFECT_RECEIPT",
    "EVENT_SET",
    "EVENT_TYPES",
    "FANOUT_STARTED",
    "INTERRUPT",
    "INTERRUPT_RESUMED",
    "LOG_FORMAT_VERSION",
    "MESSAGE_RECEIVED",
    "MESSAGE_SENT",
    "MESSAGE_WAITING",
    "OUTER_LOOP_CYCLE_COMPLETED",
    "PATCH_MARKED",
    "RETRY_DECISION",
    "RUN_CANCELLED",
    "RUN_COMPLETED",
    "RUN_FAILED",
    "RUN_INTERRUPTED",
    "RUN_RESOLVED",
    "RUN_RESTORED",
    "RUN_RESUMED",
    "RUN_RETRIED",
    "RUN_STARTED",
    "SESSION_COMPLETED",
    "SESSION_STARTED",
    "SNAPSHOT",
    "STEP_COMPLETED",
    "STEP_FAILED",
    "STEP_STARTED",
    "STREAM_CLOSED",
    "STREAM_CURSOR",
    "STREAM_WRITE",
    "TIMER_SET",
    "VALUE_RECORDED",
    "BudgetSet",
    "DriftAccepted",
    "EffectIntent",
    "EffectReceipt",
    "Event",
    "EventSet",
    "FanOutStarted",
    "InterruptRequested",
    "InterruptResumed",
    "MessageReceived",
    "MessageSent",
    "MessageWaiting",
    "OuterLoopCycleCompleted",
    "PatchMarked",
    "RetryDecision",
    "RunCompleted",
    "RunFailed",
    "RunInterruptedEvent",
    "RunResolved",
    "RunRestored",
    "RunRetried",
    "RunStarted",
    "SessionCompleted",
    "SessionStarted",
    "Snapshot",
    "StepCompleted",
    "StepFailed",
    "StepStarted",
    "StreamClosed",
    "StreamCursor",
    "StreamWrite",
    "TimerSet",
    "ValueRecorded",
    "parse_event",
]

Event = Annotated[
    RunStarted
    | StepStarted
    | StepCompleted
    | StepFailed
    | EffectIntent
    | EffectReceipt
    | ValueRecorded
    | PatchMarked
    | RetryDecision
    | SessionStarted
    | SessionCompleted
    | InterruptRequested
    | InterruptResumed
    | StreamCursor
    | MessageWaiting
    | MessageReceived
    | MessageSent
    | EventSet
    | StreamWrite
    | StreamClosed
    | FanOutStarted
    | DriftAccepted
    | TimerSet
    | Snapshot
    | RunRestored
    | RunRetried
    | OuterLoopCycleCompleted
    | RunCompleted
    | RunFailed
    | RunInterruptedEvent
    | RunCancelledEvent
    | RunResumed
    | RunResolved
    | BudgetSet,
    Field(discriminator="type"),
]
"""Any event of the log, discriminated by its ``type``."""

_EVENT: TypeAdapter[Event] = TypeAdapter(Event)

EVENT_TYPES: tuple[str, ...] = tuple(m.model_fields["type"].default for m in get_args(get_args(Event)[0]))
"""Every event type name, in the order of the table in the docs."""


def parse_event(run_id: str, seq: int, type_: str, data: str, at: float | None = None) -> Event:
    """Build the typed event of one stored row.

    Args:
        run_id: The run the row belongs to.
        seq: The row's position in the run's log.
        type_: The stored ``type`` discriminator.
        data: The stored JSON payload.
        at: When the row was written (Unix seconds), if the store kept it.

    Returns:
        The immutable event model.
    """
    payload = json.loads(data)
    payload["type"] = type_
    payload["run_id"] = run_id
    payload["seq"] = seq
    payload["at"] = at
    return _EVENT.validate_python(payload)
