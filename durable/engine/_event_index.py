"""What each event type does to a run's index: one function per type, in one table.

``ON`` maps every event type of ``events.py`` that the index keeps to a
function ``(rec, data, rows, run_id)`` that takes the event in; a type the
index does not keep (a heartbeat, a note for people) maps to one that does
nothing. ``rows`` is the log being read, for ``run.restored``, which indexes
its rows up to the checkpoint again. ``Recorded._index`` is the only caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..errors import LogFormatError
from ..events import (
    BUDGET_SET,
    DRIFT_ACCEPTED,
    EFFECT_INTENT,
    EFFECT_RECEIPT,
    EVENT_SET,
    FANOUT_STARTED,
    INTERRUPT,
    INTERRUPT_RESUMED,
    LOG_FORMAT_VERSION,
    MESSAGE_RECEIVED,
    MESSAGE_SENT,
    MESSAGE_WAITING,
    OUTER_LOOP_CYCLE_COMPLETED,
    PATCH_MARKED,
    RETRY_DECISION,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_RESOLVED,
    RUN_RESTORED,
    RUN_RESUMED,
    RUN_RETRIED,
    RUN_STARTED,
    SESSION_COMPLETED,
    SESSION_STARTED,
    SNAPSHOT,
    STEP_COMPLETED,
    STEP_FAILED,
    STEP_STARTED,
    STREAM_CLOSED,
    STREAM_CURSOR,
    STREAM_WRITE,
    TIMER_SET,
    VALUE_RECORDED,
)
from ._log_rows import WholeLogNeeded, until
from ._snapshots import decode_state

Json = dict[str, Any]
Rows = Iterable[tuple[int, str, str]]


class Recorded(Protocol):
    """What the table writes to: a run's index (``durable.engine._recorded.Recorded``).

    Declared here, as the table needs it, so that the index imports the
    table and not the other way round.
    """

    started: Json | None
    steps_started: dict[str, Json]
    steps_completed: dict[str, Json]
    steps_failed: dict[str, Json]
    attempts: dict[str, int]
    answers: dict[str, Json]
    sessions: dict[str, Json]
    retries: dict[str, list[Json]]
    terminal: tuple[str, Json] | None
    state_version: int
    cycle_completed: Json | None
    talk: dict[str, Json]
    drift_keys: list[str]
    budget: Json | None

    @classmethod
    def from_rows(cls, rows: Rows, run_id: str = "") -> Any: ...

    @classmethod
    def from_state(cls, state: Json, run_id: str = "") -> Any: ...

    def _become(self, other: Any) -> None: ...

    def accept(self, d: Json) -> None: ...

    def add_cursor(self, d: Json) -> None: ...

    def resolve(self, d: Json) -> None: ...

    def clear_failures(self, key: str, *, keep_own_retries: bool = False) -> None: ...


OnEvent = Callable[[Recorded, Json, Rows, str], None]


def _step_completed(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    p = d["path"]
    if "output" not in d:  # damaged: fails here, named by update(), not at replay
        raise KeyError("output")
    rec.steps_completed[p] = d
    rec.state_version = d["state_version"]
    if "input_hash" in d:  # its start is folded in: the completion is the start too
        rec.steps_started[p] = d
        attempts = rec.attempts
        attempts[p] = attempts.get(p, 0) + 1


def _step_started(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    p = d["path"]
    rec.steps_started[p] = d
    rec.attempts[p] = rec.attempts.get(p, 0) + 1


def _step_failed(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    if d.get("final", True):
        rec.steps_failed[d["path"]] = d


def _keyed(index: str) -> OnEvent:
    """The function of an event kept as it is, by its ``key``, in the index named ``index``."""

    def keep(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
        getattr(rec, index)[d["key"]] = d

    return keep


def _by_path(index: str) -> OnEvent:
    """The function of an event kept as it is, by its ``path``, in the index named ``index``."""

    def keep(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
        getattr(rec, index)[d["path"]] = d

    return keep


def _budget_set(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec.budget = {k: v for k, v in d.items() if k != "by"}


def _run_started(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    if d.get("format_version", 1) > LOG_FORMAT_VERSION:
        raise LogFormatError(
            f"run {run_id!r} was written with log format {d['format_version']} by a "
            f"newer durable; this one reads format {LOG_FORMAT_VERSION}. "
            "Upgrade little-workflow to resume it.",
            run_id=run_id,
        )
    rec.started = d


def _terminal(type_: str) -> OnEvent:
    """The function of a terminal event: the run's last outcome, until a later event lifts it."""

    def end(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
        rec.terminal = (type_, d)

    return end


def _lift(rec: Recorded, type_: str) -> None:
    if rec.terminal is not None and rec.terminal[0] == type_:
        rec.terminal = None


def _run_resumed(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    _lift(rec, RUN_CANCELLED)


def _interrupt_resumed(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec.answers[d["path"]] = d
    _lift(rec, RUN_INTERRUPTED)


def _session_completed(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    if d["path"] in rec.sessions:
        rec.sessions[d["path"]]["completed"] = True


def _retry_decision(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec.retries.setdefault(d["key"], []).append(d)
    if d.get("decision") == "retry":
        rec.clear_failures(d["key"], keep_own_retries=True)


def _stream_cursor(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec.add_cursor(d)


def _talk(kind: str, **extra: Any) -> OnEvent:
    """The function of an event of a call that talks to the outside (``Recorded.talk``)."""

    def keep(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
        rec.talk[d["key"]] = {**d, "kind": kind, **extra}

    return keep


def _drift_accepted(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec.accept(d)
    rec.drift_keys = []


def _run_resolved(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec.resolve(d)


def _run_retried(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    for p in d.get("paths", ()):
        rec.clear_failures(p)
    _lift(rec, RUN_FAILED)


def _cycle_completed(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    if rec.cycle_completed is None:
        rec.cycle_completed = d


def _snapshot(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    rec._become(type(rec).from_state(decode_state(d["state"], run_id), run_id))


def _run_restored(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    if not isinstance(rows, list):
        raise WholeLogNeeded(run_id)  # a streamed log cannot be read back; the caller reads it whole
    # Rebuilt from the rows up to the checkpoint: they must be in ``rows`` (recover passes
    # the whole log; an incremental update never sees a restore under its lock).
    rec._become(type(rec).from_rows(until(rows, d["checkpoint"], run_id), run_id))
    rec.state_version = d["state_version"]


def _ignored(rec: Recorded, d: Json, rows: Rows, run_id: str) -> None:
    """An event the index does not keep (a heartbeat, a note for people)."""


class _Table(dict[str, OnEvent]):
    """A table whose missing types do nothing."""

    def __missing__(self, type_: str) -> OnEvent:
        return _ignored


ON = _Table(
    {
        STEP_COMPLETED: _step_completed,
        STEP_STARTED: _step_started,
        STEP_FAILED: _step_failed,
        EFFECT_INTENT: _keyed("intents"),
        EFFECT_RECEIPT: _keyed("receipts"),
        VALUE_RECORDED: _keyed("values"),
        PATCH_MARKED: _keyed("patches"),
        BUDGET_SET: _budget_set,
        RUN_STARTED: _run_started,
        RUN_COMPLETED: _terminal(RUN_COMPLETED),
        RUN_FAILED: _terminal(RUN_FAILED),
        RUN_INTERRUPTED: _terminal(RUN_INTERRUPTED),
        RUN_CANCELLED: _terminal(RUN_CANCELLED),
        RUN_RESUMED: _run_resumed,
        TIMER_SET: _by_path("timers"),
        INTERRUPT: _by_path("interrupts"),
        INTERRUPT_RESUMED: _interrupt_resumed,
        SESSION_STARTED: _by_path("sessions"),
        SESSION_COMPLETED: _session_completed,
        RETRY_DECISION: _retry_decision,
        STREAM_CURSOR: _stream_cursor,
        MESSAGE_WAITING: _talk("recv"),
        MESSAGE_RECEIVED: _talk("recv", done=True),
        MESSAGE_SENT: _talk("send"),
        EVENT_SET: _talk("set_event"),
        STREAM_WRITE: _talk("write_stream"),
        STREAM_CLOSED: _talk("close_stream"),
        FANOUT_STARTED: _by_path("fanouts"),
        DRIFT_ACCEPTED: _drift_accepted,
        RUN_RESOLVED: _run_resolved,
        RUN_RETRIED: _run_retried,
        OUTER_LOOP_CYCLE_COMPLETED: _cycle_completed,
        SNAPSHOT: _snapshot,
        RUN_RESTORED: _run_restored,
    }
)
"""What each event type does to a run's index (``Recorded._index``)."""
