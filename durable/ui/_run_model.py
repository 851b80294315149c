"""What a run's page shows, read from the end of its log: the page of a long run costs what a short one does.

A run's page shows its last calls (``CALLS``, or ``?calls=N``). ``tail`` reads
the rows after a seq near the log's end (its last seq is one row,
``last_row``), widening the span until it holds that many calls, reaches the
run's start, or spans ``ROWS_PER_CALL`` rows per call asked for. When the span
holds the whole log, every section is what the whole log says; otherwise the
sections made of events (the calls, the raw events, decisions, compensations,
timers, checkpoints, unconfirmed effects, interrupts) are those of the span,
and the facts come from the rows that hold them alone: the run's summary, its
first rows (input, code, fork origin, budget), its last (output), its
control record. What the live view compares (``run_fingerprint``) is read the
same way: a few rows, never the log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ..engine import (
    FIRST_TYPES,
    Recorded,
    WorldCore,
    budget_text,
    recorded_budget,
    run_usage,
)
from ..errors import RunNotFoundError
from ..events import RUN_COMPLETED, RUN_FAILED, RUN_RESOLVED, RUN_RESTORED
from ..ops import checkpoints_of, first_seqs, read_calls
from ..runtime import control_of, driver_of, run_status, short_hash
from ..store import EventLog, Row, row_times
from ._model import compensations, iso, pending_messages, timeline
from ._tree import build_tree, last_calls

CALLS = 50
"""The calls a run's page shows, the last ones, unless it is asked for more (``?calls=N``)."""
MOST_CALLS = 100_000
"""The most calls one page shows."""
ROWS_PER_CALL = 64
"""The most rows read per call asked for: a run of few calls and many other events stops there."""
HEAD = 16
"""The first rows read for what a run records as it starts (its start, its first budget)."""


@dataclass(frozen=True)
class Tail:
    """The last rows of a run's log, and whether they are all of it.

    Attributes:
        rows: The rows read, in seq order.
        whole: Whether they begin at the run's start (or the snapshot that replaced it).
        last_seq: The seq of the log's last row.
    """

    rows: list[Row]
    whole: bool
    last_seq: int


def last_seq(log: EventLog, run_id: str) -> int:
    """The seq of the run's last row (0 for none), read as one row where the log can."""
    last = getattr(log, "last_row", None)
    if last is None:  # a log of another program: read whole
        rows = log.read(run_id)
        return rows[-1][0] if rows else 0
    row = last(run_id)
    return 0 if row is None else int(row[0])


def _calls_in(rows: list[Row]) -> int:
    """About how many calls the rows name (each path or key once)."""
    return len(first_seqs({"seq": seq, **json.loads(data)} for seq, _, data in rows))


def tail(log: EventLog, run_id: str, calls: int) -> Tail:
    """The run's last rows: enough to hold ``calls`` calls, or the whole log, or ``ROWS_PER_CALL * calls``.

    Seqs are consecutive within a log, so the rows after ``last - span`` are at
    most ``span`` rows. A span holding a ``run.restored`` is read whole: a
    restore indexes again the rows before its checkpoint.
    """
    end = last_seq(log, run_id)
    most = ROWS_PER_CALL * calls
    span = min(4 * calls + 8, most)
    while True:
        after = max(0, end - span)
        rows = log.read(run_id, after)
        whole = after == 0 or (bool(rows) and rows[0][1] in FIRST_TYPES)
        if whole or span >= most or _calls_in(rows) > calls:
            break
        span = min(span * 4, most)
    if not whole and any(r[1] == RUN_RESTORED for r in rows):
        rows, whole = log.read(run_id), True
    return Tail(rows, whole, end)


def _head(world: WorldCore, run_id: str) -> Recorded:
    """The run's first rows indexed: its start and what it recorded as it began (a budget)."""
    return Recorded.from_rows(list(islice(world.log.iter_rows(run_id), HEAD)), run_id)


def run_detail(world: WorldCore, run_id: str, calls: int = CALLS) -> dict[str, Any]:
    """Everything the run page shows about one run: its facts and its last ``calls`` calls.

    Raises:
        RunNotFoundError: The world has no such run.
    """
    info = world.log.info(run_id)
    if info is None:
        return _not_started(world, run_id)
    t = tail(world.log, run_id, calls)
    first = t.rows[0][0] if t.rows else 0
    read = read_calls(world, run_id, t.rows)
    rec = read.recorded
    events = read.events
    times = row_times(world.log, run_id, max(0, first - 1))
    for ev in events:
        ev["at"] = times.get(ev["seq"])
    items, resumed_at = timeline(events)
    head = rec if t.whole else _head(world, run_id)
    started = head.started or {}
    budget = recorded_budget(rec) or recorded_budget(head)
    terminal = rec.terminal if rec.terminal and rec.terminal[0] == RUN_COMPLETED else None
    st = run_status(world, run_id)
    driver = driver_of(world, run_id) if st.status == "running" else None
    status = st.status
    if driver is not None and driver["driver"] == "orphaned":
        status = "orphaned"
    error = None
    for e in events:
        if e["type"] == RUN_FAILED:
            error = {"text": _error_text(e), "path": e.get("path"), "drift_keys": e.get("drift_keys") or []}
    blocked = None
    if st.status == "blocked":
        err = st.error or {}
        blocked = {
            "reason": st.reason,
            "error": (err.get("error_message") or "").splitlines()[0] if err.get("error_message") else "",
            "key": err.get("key"),
            "fixes": st.fixes,
        }
    usage = _usage(world, run_id) if t.whole else None
    tree, left_out = last_calls(build_tree(read.calls, items, first_seqs(events)), calls)
    return {
        "messages": pending_messages(world, run_id),
        "run_id": run_id,
        "workflow": info.workflow,
        "status": status,
        "raw_status": st.status,
        "reason": st.reason,
        "queue": st.queue,
        "items": items,
        "tree": tree,
        "window": {
            "whole": t.whole,
            "calls": calls,
            "left_out": left_out,
            "first_seq": first,
            "last_seq": t.last_seq,
        },
        "missing_artifacts": read.missing_artifacts,
        "events": events,
        "has_input": "input" in started,
        "input": started.get("input"),
        "has_output": terminal is not None,
        "output": terminal[1].get("output") if terminal else None,
        "fork_of": started.get("fork_of"),
        "fork_seq": started.get("fork_seq"),
        "last_seq": t.last_seq,
        "unconfirmed": rec.unconfirmed(),
        "waiting": [
            {"path": p, "value": json.dumps(rec.interrupts[p].get("value"), default=str)}
            for p in rec.interrupts
            if p not in rec.answers
        ],
        "timers": _timers(world, rec),
        "children": [it.child_run_id for it in items if it.child_run_id],
        "checkpoints": [{"seq": c.seq, "path": c.path} for c in checkpoints_of(t.rows)],
        "resumed_at": resumed_at,
        "error": error,
        "blocked": blocked,
        "usage": usage if usage is not None and (usage["calls"] or budget is not None) else None,
        "budget": None if budget is None else {"text": budget_text(budget), "json": budget.to_json()},
        "resolutions": [
            {"decision": e["decision"], "key": e.get("key"), "by": e["by"], "when": iso(e["decided_at"])}
            for e in events
            if e["type"] == RUN_RESOLVED
        ],
        "compensations": compensations(events),
        "parent_run_id": info.parent_run_id,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "started_at": events[0].get("at") if t.whole and events else info.created_at,
        "driver": driver,
        "code": short_hash(started.get("manifest_hash")),
        "code_detail": st.detail,
        "patches": sorted(rec.patches),
    }


def _error_text(e: dict[str, Any]) -> str:
    return f"{e.get('error_type') or 'Error'}: {e.get('error_message') or ''}".strip()


def _usage(world: WorldCore, run_id: str) -> dict[str, Any]:
    spent = run_usage(world, run_id)
    return {
        "calls": spent.calls,
        "input_tokens": spent.input_tokens,
        "output_tokens": spent.output_tokens,
        "cost": round(spent.cost, 6),
    }


def _timers(world: WorldCore, rec: Recorded) -> list[dict[str, Any]]:
    now = world.clock()
    return [
        {"path": p, "wake_at": iso(t.get("wake_at")), "passed": float(t.get("wake_at") or 0) <= now}
        for p, t in rec.timers.items()
    ]


def _not_started(world: WorldCore, run_id: str) -> dict[str, Any]:
    """The page of a run that has no log yet (enqueued, not claimed)."""
    st = run_status(world, run_id)
    ctl = control_of(world).get(run_id)
    return {
        "run_id": run_id,
        "workflow": ctl.workflow if ctl else "",
        "status": "waiting" if st.status == "enqueued" else st.status,
        "raw_status": st.status,
        "reason": st.reason,
        "queue": st.queue,
        "items": [],
        "tree": [],
        "window": None,
        "events": [],
        "last_seq": 0,
        "unconfirmed": [],
        "waiting": [],
        "timers": [],
        "messages": pending_messages(world, run_id),
        "children": [],
        "checkpoints": [],
        "resumed_at": 0,
        "error": None,
        "parent_run_id": None,
        "created_at": ctl.created_at if ctl else None,
        "updated_at": ctl.created_at if ctl else None,
        "started_at": None,
        "driver": None,
    }


def run_fingerprint(world: WorldCore, run_id: str) -> str:
    """Changes whenever the run writes an event or changes status: a few rows read, never its log."""
    info = world.log.info(run_id)
    try:
        status = run_status(world, run_id).status
    except RunNotFoundError:
        return "gone"
    driver = driver_of(world, run_id)["driver"] if status == "running" else ""
    return f"{status}:{last_seq(world.log, run_id)}:{driver}:{info.updated_at if info else 0}"
