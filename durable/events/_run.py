"""The events of a run as a whole: its start, its end, and what changes it between drives."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._base import EventBase
from ._names import LOG_FORMAT_VERSION


class RunStarted(EventBase):
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


class DriftAccepted(EventBase):
    """The run's manifest replaced: drift accepted on purpose, or the code that drives the run now.

    A resume that accepts drift (``run_workflow(..., accept_drift=[...])``)
    writes one with the accepted ``changes``. A drive whose code differs from
    the run's manifest only where the run's log does not look (a capability
    the run never used, a compatible change) writes one with no ``changes``,
    together with its first write (format 9 on): the run's manifest is then
    the code's that made its latest calls. From here on the run is compared
    with the manifest this event carries: the run's own (``session`` is
    ``None``) or the session's at ``session``.
    """

    type: Literal["drift.accepted"] = "drift.accepted"
    changes: list[dict[str, Any]] = Field(default_factory=list)
    """Each accepted change as ``{"key", "old", "new"}``."""
    session: str | None = None
    manifest: dict[str, Any] = Field(default_factory=dict)
    manifest_hash: str
    output_schema_hash: str | None = None
    replaced: list[dict[str, Any]] | None = None
    """Every other difference from the manifest replaced, as ``{"key", "old", "new"}`` (format 9 on):
    the earlier signatures under which calls of the run were recorded."""


class Snapshot(EventBase):
    """Canonical state that subsumes every event before ``base_seq`` (compaction)."""

    type: Literal["snapshot"] = "snapshot"
    state: dict[str, Any]
    state_hash: str
    base_seq: int


class RunRestored(EventBase):
    """State was rolled back to the checkpoint at ``checkpoint`` (a seq)."""

    type: Literal["run.restored"] = "run.restored"
    checkpoint: int
    state_version: int


class RunRetried(EventBase):
    """``run_workflow(..., retry_failed=True)`` cleared the recorded failures."""

    type: Literal["run.retried"] = "run.retried"
    paths: list[str] = Field(default_factory=list)


class OuterLoopCycleCompleted(EventBase):
    """The commit point of one outer-loop cycle: supervise's first answer."""

    type: Literal["outer_loop.cycle_completed"] = "outer_loop.cycle_completed"
    outer_loop_id: str
    cycle: int
    output: Any = None
    decision: Literal["done", "continue"]
    next_input: Any = None
    final_output: Any = None
    summary: str | None = None


class RunCompleted(EventBase):
    """The run finished with an output."""

    type: Literal["run.completed"] = "run.completed"
    output: Any = None
    output_hash: str


class RunFailed(EventBase):
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


class RunCancelledEvent(EventBase):
    """The run stopped on a cancellation (``reason``: ``requested`` or ``deadline``)."""

    type: Literal["run.cancelled"] = "run.cancelled"
    reason: str = "requested"
    compensated: list[str] | None = None
    """The compensations run before the run ended, as ``compensate:<key>`` (format 7 on)."""


class RunResumed(EventBase):
    """``resume_run`` continued a cancelled run: the cancellation is forgotten."""

    type: Literal["run.resumed"] = "run.resumed"
    reason: str = "requested"


class RunResolved(EventBase):
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


class BudgetSet(EventBase):
    """The run's budget (``durable.Budget``), set at its start or raised by a resume; the last one holds."""

    type: Literal["budget.set"] = "budget.set"
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    prices: dict[str, list[float]] | None = None
    by: str | None = None


class RunInterruptedEvent(EventBase):
    """The run suspended at an interrupt and waits for ``resume=``."""

    type: Literal["run.interrupted"] = "run.interrupted"
    path: str
    value: Any = None
