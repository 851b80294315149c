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
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

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

LOG_FORMAT_VERSION = 8
"""The log format this SDK writes; a log with a larger version is refused.

Format 2 added the folded step start: a ``step.completed`` that carries
``attempt``, ``input_hash`` and ``pos`` has no ``step.started`` before it.
Format 3 added ``fanout.started``, the branch keys of a ``parallel`` call.
Format 4 added ``run.cancelled``, ``run.resumed`` and the ``deadline_at`` of
``run.started``. Format 5 added the events of talking to runs:
``message.waiting``, ``message.received``, ``message.sent``, ``event.set``,
``stream.write`` and ``stream.closed``, and the ``traceparent`` of
``run.started`` (the W3C trace context its first drive ran in, which later
drives link to), and the ``ms`` of step and effect outcomes (how long the
attempt took). Format 6 added ``run.resolved``, a person's decision about a
run that was ``blocked`` or waited for an answer, and the ``drift_keys`` of a
``run.failed`` for drift. Format 7 added ``budget.set`` (a run's budget, set
when it starts or raised by a resume) and the ``usage`` of a model call's
``effect.receipt`` (the tokens its response reported), the ``compensated``
of ``run.failed`` and ``run.cancelled``, and ``patch.marked``, where a run
took the new side of a ``durable.patched()`` change. Format 8 added the
``input`` or ``input_ref`` of ``step.started`` (and of a folded
``step.completed``) and ``effect.intent``: the call's arguments, inline, as
an artifact, or as what they append to the previous call's (a delta); the
inspector and ``little diff`` show them, replay still decides by
``input_hash``. This SDK reads formats 1 to 8.
"""

# The event types, each named once: the models below carry these strings as their ``type``.
RUN_STARTED: Final = "run.started"
STEP_STARTED: Final = "step.started"
STEP_COMPLETED: Final = "step.completed"
STEP_FAILED: Final = "step.failed"
EFFECT_INTENT: Final = "effect.intent"
EFFECT_RECEIPT: Final = "effect.receipt"
VALUE_RECORDED: Final = "value.recorded"
PATCH_MARKED: Final = "patch.marked"
RETRY_DECISION: Final = "retry.decision"
SESSION_STARTED: Final = "session.started"
SESSION_COMPLETED: Final = "session.completed"
INTERRUPT: Final = "interrupt"
INTERRUPT_RESUMED: Final = "interrupt.resumed"
STREAM_CURSOR: Final = "stream.cursor"
MESSAGE_WAITING: Final = "message.waiting"
MESSAGE_RECEIVED: Final = "message.received"
MESSAGE_SENT: Final = "message.sent"
EVENT_SET: Final = "event.set"
STREAM_WRITE: Final = "stream.write"
STREAM_CLOSED: Final = "stream.closed"
FANOUT_STARTED: Final = "fanout.started"
DRIFT_ACCEPTED: Final = "drift.accepted"
TIMER_SET: Final = "timer.set"
SNAPSHOT: Final = "snapshot"
RUN_RESTORED: Final = "run.restored"
RUN_RETRIED: Final = "run.retried"
OUTER_LOOP_CYCLE_COMPLETED: Final = "outer_loop.cycle_completed"
RUN_COMPLETED: Final = "run.completed"
RUN_FAILED: Final = "run.failed"
RUN_CANCELLED: Final = "run.cancelled"
RUN_RESUMED: Final = "run.resumed"
RUN_RESOLVED: Final = "run.resolved"
BUDGET_SET: Final = "budget.set"
RUN_INTERRUPTED: Final = "run.interrupted"


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = ""
    """The run this event belongs to."""
    seq: int = 0
    """Position in the run's log: 1, 2, 3, … without gaps."""
    at: float | None = None
    """When the log committed the event, in Unix seconds (the store's clock; ``None`` for
    rows written before the store kept times, or by a store that keeps none)."""


class RunStarted(_Event):
    """A run began: everything a resume must match."""

    type: Literal["run.started"] = "run.started"
    workflow: str
    input: Any = None
    input_hash: str
    manifest: dict[str, Any] = Field(default_factory=dict)
    manifest_hash: str = ""
    models: dict[str, str] = Field(default_factory=dict)
    output_schema_hash: str = ""
    format_version: int = LOG_FORMAT_VERSION
    parent_run_id: str | None = None
    parent_key: str | None = None
    fork_of: str | None = None
    fork_seq: int | None = None
    deadline_at: float | None = None
    traceparent: str | None = None
    """The W3C trace context of the run's first drive, when tracing was on."""


class StepStarted(_Event):
    """A step's attempt began (written together with its first durable outcome)."""

    type: Literal["step.started"] = "step.started"
    path: str
    visit: int = 0
    attempt: int = 1
    input_hash: str
    pos: int = 0
    input: dict[str, Any] | None = None
    """The call's arguments by parameter name, as hashed for ``input_hash`` (format 8 on; short ones)."""
    input_ref: dict[str, Any] | None = None
    """Where longer arguments are: ``{"artifact"}`` or a delta ``{"base", "append", "args"}`` (format 8)."""


class StepCompleted(_Event):
    """A step committed: its output is never recomputed.

    When nothing was written between the step's start and its completion,
    the start is folded in: ``attempt``, ``input_hash`` and ``pos`` are set
    and no ``step.started`` precedes this event.
    """

    type: Literal["step.completed"] = "step.completed"
    path: str
    visit: int = 0
    attempt: int | None = None
    input_hash: str | None = None
    pos: int | None = None
    output: Any = None
    output_hash: str
    state_version: int
    artifact: dict[str, Any] | None = None
    """The artifact holding the output when it was too large for the log (``output`` is then null)."""
    ms: float | None = None
    """How long the attempt took, in milliseconds, from its start to its commit (format 5 on)."""
    input: dict[str, Any] | None = None
    """The step's arguments when its start is folded in (as in ``StepStarted``)."""
    input_ref: dict[str, Any] | None = None
    """Where longer arguments are when its start is folded in (as in ``StepStarted``)."""


class StepFailed(_Event):
    """A step's attempt failed; ``final`` says whether it failed for good."""

    type: Literal["step.failed"] = "step.failed"
    path: str
    visit: int = 0
    attempt: int = 1
    error_type: str
    error_message: str
    error_args: list[Any] | None = None
    final: bool = True
    ms: float | None = None
    """How long the attempt took, in milliseconds (format 5 on)."""


class EffectIntent(_Event):
    """An external call is about to start (durable before it leaves the process)."""

    type: Literal["effect.intent"] = "effect.intent"
    key: str
    kind: str
    name: str
    input_hash: str
    pos: int = 0
    child_run_id: str | None = None
    input: dict[str, Any] | None = None
    """The call's arguments by parameter name, as hashed for ``input_hash`` (format 8 on; short ones)."""
    input_ref: dict[str, Any] | None = None
    """Where longer arguments are: ``{"artifact"}`` or a delta ``{"base", "append", "args"}`` (format 8)."""


class EffectReceipt(_Event):
    """An external call finished; with its intent the effect is confirmed."""

    type: Literal["effect.receipt"] = "effect.receipt"
    key: str
    outcome: Literal["ok", "error"]
    result: Any = None
    error_type: str | None = None
    error_message: str | None = None
    error_args: list[Any] | None = None
    ms: float | None = None
    """How long the call took, in milliseconds, from its intent to its receipt (format 5 on)."""
    usage: dict[str, Any] | None = None
    """A model call's token usage: ``input_tokens``, ``output_tokens`` and ``model`` (format 7 on)."""


class ValueRecorded(_Event):
    """A value read once from the outside (clock, randomness) and replayed after."""

    type: Literal["value.recorded"] = "value.recorded"
    key: str
    kind: str
    value: Any = None
    pos: int = 0


class PatchMarked(_Event):
    """A run reached ``durable.patched(change_id)`` running new code: it takes the new side there.

    The marker takes no position among the scope's calls, so deleting the
    ``if patched(...)`` later shifts nothing.
    """

    type: Literal["patch.marked"] = "patch.marked"
    key: str
    change_id: str


class RetryDecision(_Event):
    """A retry policy decided after a failed attempt."""

    type: Literal["retry.decision"] = "retry.decision"
    key: str
    attempt: int
    decision: Literal["retry", "give_up"]
    backoff: float = 0.0
    wake_at: float | None = None
    error_type: str | None = None
    first_attempt_at: float | None = None


class SessionStarted(_Event):
    """An agent session began, with the manifest a resume must match."""

    type: Literal["session.started"] = "session.started"
    path: str
    role: str
    manifest: dict[str, Any] = Field(default_factory=dict)
    manifest_hash: str
    manifest_format: int = 1
    """2 when its tools list their options; a format-1 manifest is compared without them."""


class SessionCompleted(_Event):
    """An agent session ended."""

    type: Literal["session.completed"] = "session.completed"
    path: str
    role: str
    manifest_hash: str


class InterruptRequested(_Event):
    """The run asked for an answer from outside and suspended."""

    type: Literal["interrupt"] = "interrupt"
    path: str
    value: Any = None
    pos: int = 0


class InterruptResumed(_Event):
    """The answer to an interrupt, given by a later ``run_workflow(..., resume=)``."""

    type: Literal["interrupt.resumed"] = "interrupt.resumed"
    path: str
    value: Any = None


class StreamCursor(_Event):
    """Chunks of a streamed model call consumed so far; ``terminal`` when it ended."""

    type: Literal["stream.cursor"] = "stream.cursor"
    key: str
    chunks: int
    terminal: bool
    data: list[Any] = Field(default_factory=list)


class MessageWaiting(_Event):
    """A ``recv`` with a timeout began waiting: the time its wait ends (a resume waits only the rest)."""

    type: Literal["message.waiting"] = "message.waiting"
    key: str
    topic: str | None = None
    wake_at: float
    pos: int = 0


class MessageReceived(_Event):
    """A ``recv`` returned: the message it consumed, or ``timed_out`` with no message.

    On a world whose messages live beside the log, this event and the
    message's consumption commit in one transaction.
    """

    type: Literal["message.received"] = "message.received"
    key: str
    topic: str | None = None
    message_id: str | None = None
    value: Any = None
    timed_out: bool = False
    pos: int = 0


class MessageSent(_Event):
    """A ``send`` made inside the run: the message is stored under ``message_id`` (sent once)."""

    type: Literal["message.sent"] = "message.sent"
    key: str
    target: str
    topic: str | None = None
    message_id: str
    pos: int = 0


class EventSet(_Event):
    """``durable.set_event(name, value)``: readers see the last value of ``name``."""

    type: Literal["event.set"] = "event.set"
    key: str
    name: str
    value: Any = None
    pos: int = 0


class StreamWrite(_Event):
    """One value written to the stream ``stream`` (``write_stream``, or a mirrored model chunk).

    A mirrored chunk has no position of its own (``pos`` is ``None``): its key
    names the model call and the chunk's index.
    """

    type: Literal["stream.write"] = "stream.write"
    key: str
    stream: str
    value: Any = None
    pos: int | None = 0


class StreamClosed(_Event):
    """``durable.close_stream(stream)``: readers of the stream end after its last value."""

    type: Literal["stream.closed"] = "stream.closed"
    key: str
    stream: str
    pos: int = 0


class FanOutStarted(_Event):
    """A ``parallel`` call began: its name and every branch key, in item order.

    A resume that fans out at the same place with another name or other keys
    fails with ``NondeterminismError`` instead of running every branch again.
    """

    type: Literal["fanout.started"] = "fanout.started"
    path: str
    """The fan-out's key in its scope: ``fanout#<m>`` for the scope's m-th fan-out."""
    name: str
    keys: list[str] = Field(default_factory=list)


class DriftAccepted(_Event):
    """A resume accepted drift on purpose (``run_workflow(..., accept_drift=[...])``).

    From here on the run is compared with the manifest this event carries:
    the run's own (``session`` is ``None``) or the session's at ``session``.
    """

    type: Literal["drift.accepted"] = "drift.accepted"
    changes: list[dict[str, Any]] = Field(default_factory=list)
    """Each accepted change as ``{"key", "old", "new"}``."""
    session: str | None = None
    manifest: dict[str, Any] = Field(default_factory=dict)
    manifest_hash: str
    output_schema_hash: str | None = None


class TimerSet(_Event):
    """A durable sleep's wake time."""

    type: Literal["timer.set"] = "timer.set"
    path: str
    wake_at: float
    pos: int = 0


class Snapshot(_Event):
    """Canonical state that subsumes every event before ``base_seq`` (compaction)."""

    type: Literal["snapshot"] = "snapshot"
    state: dict[str, Any]
    state_hash: str
    base_seq: int


class RunRestored(_Event):
    """State was rolled back to the checkpoint at ``checkpoint`` (a seq)."""

    type: Literal["run.restored"] = "run.restored"
    checkpoint: int
    state_version: int


class RunRetried(_Event):
    """``run_workflow(..., retry_failed=True)`` cleared the recorded failures."""

    type: Literal["run.retried"] = "run.retried"
    paths: list[str] = Field(default_factory=list)


class OuterLoopCycleCompleted(_Event):
    """The commit point of one outer-loop cycle: supervise's first answer."""

    type: Literal["outer_loop.cycle_completed"] = "outer_loop.cycle_completed"
    outer_loop_id: str
    cycle: int
    output: Any = None
    decision: Literal["done", "continue"]
    next_input: Any = None
    final_output: Any = None
    summary: str | None = None


class RunCompleted(_Event):
    """The run finished with an output."""

    type: Literal["run.completed"] = "run.completed"
    output: Any = None
    output_hash: str


class RunFailed(_Event):
    """The run failed for good."""

    type: Literal["run.failed"] = "run.failed"
    error_type: str
    error_message: str
    error_args: list[Any] | None = None
    path: str | None = None
    drift_keys: list[str] | None = None
    """The drift keys of a run that a worker left because of drift (``resume --accept-drift``)."""
    compensated: list[str] | None = None
    """The compensations run before the run failed, as ``compensate:<key>`` (format 7 on)."""


class RunCancelledEvent(_Event):
    """The run stopped on a cancellation (``reason``: ``requested`` or ``deadline``)."""

    type: Literal["run.cancelled"] = "run.cancelled"
    reason: str = "requested"
    compensated: list[str] | None = None
    """The compensations run before the run ended, as ``compensate:<key>`` (format 7 on)."""


class RunResumed(_Event):
    """``resume_run`` continued a cancelled run: the cancellation is forgotten."""

    type: Literal["run.resumed"] = "run.resumed"
    reason: str = "requested"


class RunResolved(_Event):
    """A person's decision about the run, recorded with who made it and when.

    ``decision`` is ``happened`` (the unknown commit at ``key`` took place:
    ``result`` is its receipt), ``not_happened`` (it did not: the call runs
    again with the same key), ``accept_drift`` (``drift_keys`` are accepted
    at the next drive), ``answer`` (the interrupt at ``key`` was answered
    without the run's input) or ``resume`` (the run goes on as it is).
    """

    type: Literal["run.resolved"] = "run.resolved"
    decision: Literal["happened", "not_happened", "accept_drift", "answer", "resume"]
    key: str | None = None
    result: Any = None
    drift_keys: list[str] = Field(default_factory=list)
    by: str
    decided_at: float


class BudgetSet(_Event):
    """The run's budget (``durable.Budget``), set at its start or raised by a resume; the last one holds."""

    type: Literal["budget.set"] = "budget.set"
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    prices: dict[str, list[float]] | None = None
    by: str | None = None


class RunInterruptedEvent(_Event):
    """The run suspended at an interrupt and waits for ``resume=``."""

    type: Literal["run.interrupted"] = "run.interrupted"
    path: str
    value: Any = None


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
