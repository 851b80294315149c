"""The log format version this SDK writes and the event types, each named once."""

from __future__ import annotations

from typing import Final

LOG_FORMAT_VERSION = 9
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
``input_hash``. Format 9 added the ``drift.accepted`` a drive writes with its
first write when its code's manifest differs from the run's only where the
log does not look (its ``changes`` empty), and the ``replaced`` of
``drift.accepted``: the run's manifest follows the code that made its latest
calls. An older SDK reads that event as it reads any ``drift.accepted`` (the
manifest compared from then on) and refuses runs started in format 9. This
SDK reads formats 1 to 9.
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
