"""The events of the calls inside a run: steps, effects, recorded values, sessions, timers, branches."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._base import EventBase


class StepStarted(EventBase):
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


class StepCompleted(EventBase):
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


class StepFailed(EventBase):
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


class EffectIntent(EventBase):
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


class EffectReceipt(EventBase):
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


class ValueRecorded(EventBase):
    """A value read once from the outside (clock, randomness) and replayed after."""

    type: Literal["value.recorded"] = "value.recorded"
    key: str
    kind: str
    value: Any = None
    pos: int = 0


class PatchMarked(EventBase):
    """A run reached ``durable.patched(change_id)`` running new code: it takes the new side there.

    The marker takes no position among the scope's calls, so deleting the
    ``if patched(...)`` later shifts nothing.
    """

    type: Literal["patch.marked"] = "patch.marked"
    key: str
    change_id: str


class RetryDecision(EventBase):
    """A retry policy decided after a failed attempt."""

    type: Literal["retry.decision"] = "retry.decision"
    key: str
    attempt: int
    decision: Literal["retry", "give_up"]
    backoff: float = 0.0
    wake_at: float | None = None
    error_type: str | None = None
    first_attempt_at: float | None = None


class SessionStarted(EventBase):
    """An agent session began, with the manifest a resume must match."""

    type: Literal["session.started"] = "session.started"
    path: str
    role: str
    manifest: dict[str, Any] = Field(default_factory=dict)
    manifest_hash: str
    manifest_format: int = 1
    """2 when its tools list their options; a format-1 manifest is compared without them."""


class SessionCompleted(EventBase):
    """An agent session ended."""

    type: Literal["session.completed"] = "session.completed"
    path: str
    role: str
    manifest_hash: str


class InterruptRequested(EventBase):
    """The run asked for an answer from outside and suspended."""

    type: Literal["interrupt"] = "interrupt"
    path: str
    value: Any = None
    pos: int = 0


class InterruptResumed(EventBase):
    """The answer to an interrupt, given by a later ``run_workflow(..., resume=)``."""

    type: Literal["interrupt.resumed"] = "interrupt.resumed"
    path: str
    value: Any = None


class FanOutStarted(EventBase):
    """A ``parallel`` call began: its name and every branch key, in item order.

    A resume that fans out at the same place with another name or other keys
    fails with ``NondeterminismError`` instead of running every branch again.
    """

    type: Literal["fanout.started"] = "fanout.started"
    path: str
    """The fan-out's key in its scope: ``fanout#<m>`` for the scope's m-th fan-out."""
    name: str
    keys: list[str] = Field(default_factory=list)


class TimerSet(EventBase):
    """A durable sleep's wake time."""

    type: Literal["timer.set"] = "timer.set"
    path: str
    wake_at: float
    pos: int = 0
