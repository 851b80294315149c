"""What the inspector shows, read from a world: the run list, a timeline of events, queues and drivers.

Everything here takes a world and returns plain data; the pages
(``_pages``) turn it into HTML and the app (``_app``) serves it. What a
run's own page reads is in ``_run_model``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from typing import Any

from ..engine import COMPENSATE, WorldCore
from ..errors import DurableError
from ..events import (
    DRIFT_ACCEPTED,
    EFFECT_INTENT,
    EFFECT_RECEIPT,
    INTERRUPT_RESUMED,
    RETRY_DECISION,
    RUN_COMPLETED,
    RUN_RESUMED,
    RUN_RETRIED,
    SESSION_COMPLETED,
    SESSION_STARTED,
    STEP_COMPLETED,
    STEP_FAILED,
    STEP_STARTED,
    TIMER_SET,
    VALUE_RECORDED,
)
from ..ops import align, read_calls
from ..runtime import control_of, driver_of, keeps_control
from ..runtime import list_runs as runs_page
from ._timeline_item import Item as Item

STATUSES = ("running", "orphaned", "waiting", "interrupted", "blocked", "completed", "failed", "cancelled")
"""The statuses the inspector tells apart: ``waiting`` is enqueued, ``orphaned`` running without a driver."""

PAGE = 200
"""Runs on one page of the run list."""

LIVE_WINDOW = 50
"""How many of the newest runs the list's live view watches for a change of status."""

RESUME_MARKS = (INTERRUPT_RESUMED, RUN_RESUMED, RUN_RETRIED, DRIFT_ACCEPTED)
"""Events a later drive writes when it takes a finished or waiting run up again."""


def iso(t: float | None, timespec: str = "seconds") -> str:
    """A Unix time as ISO 8601 in UTC (to the second, or another ``timespec``), or ``""``."""
    if not t:
        return ""
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).isoformat(timespec=timespec)


def _ui_status(row: dict[str, Any]) -> str:
    status = str(row.get("status", ""))
    if status == "enqueued":
        return "waiting"
    if status == "running" and row.get("orphaned"):
        return "orphaned"
    return status


_ASKED = {"waiting": "enqueued", "orphaned": "running"}
"""The runtime's status of an inspector status that is not its own."""


def list_runs(
    world: WorldCore,
    *,
    status: str | None = None,
    workflow: str | None = None,
    search: str | None = None,
    limit: int = PAGE,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """A page of runs newest first with the inspector's status, and whether older runs match (1) or not (0).

    The status and the workflow filter every run in the database (the page
    is cut after them); the search text narrows the page.
    """
    asked = None if status is None else _ASKED.get(status, status)
    rows, left_out = runs_page(
        world, status=asked, workflow=workflow, limit=limit, offset=offset, count=False
    )
    older = left_out - offset  # what the page left out counts the newer runs it skipped too
    for r in rows:
        if r["status"] == "running" and r.get("parent_run_id") is not None:
            r["orphaned"] = driver_of(world, str(r["run_id"]))["driver"] == "orphaned"
        r["ui_status"] = _ui_status(r)
    needle = (search or "").strip().lower()
    out = []
    for r in rows:
        if status and r["ui_status"] != status:
            continue
        if needle and needle not in str(r["run_id"]).lower() and needle not in str(r["workflow"]).lower():
            continue
        out.append(r)
    return out, older


def list_fingerprint(world: WorldCore) -> str:
    """Changes whenever a run appears or one of the newest changes status, or the runtime moves one.

    What the list's live view polls: the newest summaries (one indexed read,
    no run's log, no driver) and the control store's change counter; the
    page itself is read again only when this changes.
    """
    newest = [(i.run_id, i.status, i.updated_at) for i in world.runs(limit=LIVE_WINDOW)]
    moved = control_of(world).version() if keeps_control(world) else 0
    return json.dumps([moved, newest])


def _error_text(e: dict[str, Any]) -> str:
    return f"{e.get('error_type') or 'Error'}: {e.get('error_message') or ''}".strip()


def _name_of(key: str) -> str:
    last = key.rsplit(".", 1)[-1]
    return last.split("#", 1)[0].split(":", 1)[-1]


def timeline(events: Iterable[dict[str, Any]]) -> tuple[list[Item], int]:
    """The calls of a run in log order, and the seq of the last resume mark (0 when none)."""
    items: dict[tuple[str, str], Item] = {}
    order: list[Item] = []
    resumed_at = 0

    def item(kind: str, key: str, seq: int, name: str | None = None) -> Item:
        got = items.get((kind, key))
        if got is None:
            got = Item(kind, key, name or _name_of(key), seq, seq)
            items[(kind, key)] = got
            order.append(got)
        got.last_seq = max(got.last_seq, seq)
        return got

    written: dict[int, float] = {}
    for e in events:
        t, seq = e["type"], e["seq"]
        if e.get("at") is not None:
            written[seq] = e["at"]
        if t in RESUME_MARKS:
            resumed_at = seq
        if t == STEP_STARTED:
            it = item("step", e["path"], seq)
            it.attempts = max(it.attempts, e.get("attempt", 1))
            it.state = "running"
        elif t == STEP_COMPLETED:
            it = item("step", e["path"], seq)
            it.attempts = max(it.attempts, e.get("attempt") or 1)
            it.state = "completed"
            it.took(e)
        elif t == STEP_FAILED:
            it = item("step", e["path"], seq)
            it.took(e)
            it.errors.append(f"attempt {e.get('attempt', 1)}: {_error_text(e)}")
            it.state = "failed" if e.get("final", True) else "retrying"
        elif t == EFFECT_INTENT:
            it = item("effect", e["key"], seq, e.get("name"))
            it.detail = e.get("kind", "")
            it.child_run_id = e.get("child_run_id") or it.child_run_id
            if it.state in ("error", "retrying"):
                it.attempts += 1
            it.state = "unconfirmed"
        elif t == EFFECT_RECEIPT:
            it = item("effect", e["key"], seq)
            it.took(e)
            if e.get("outcome") == "error":
                it.errors.append(f"attempt {it.attempts}: {_error_text(e)}")
                it.state = "error"
            else:
                it.state = "confirmed"
        elif t == RETRY_DECISION:
            key = e["key"]
            kind = "step" if ("step", key) in items else "effect"
            it = item(kind, key, seq)
            if e.get("decision") == "retry":
                it.state = "retrying"
                it.detail = f"retry in {e.get('backoff', 0)} s (wakes {iso(e.get('wake_at'))})"
        elif t == TIMER_SET:
            it = item("timer", e["path"], seq, "sleep")
            it.state = "set"
            it.detail = f"wakes {iso(e.get('wake_at'))}"
        elif t == "interrupt":
            it = item("interrupt", e["path"], seq, "interrupt")
            it.state = "waiting"
            it.detail = json.dumps(e.get("value"), default=str)
        elif t == INTERRUPT_RESUMED:
            it = item("interrupt", e["path"], seq, "interrupt")
            it.state = "answered"
            it.detail = f"answer: {json.dumps(e.get('value'), default=str)}"
        elif t == SESSION_STARTED:
            it = item("session", e["path"], seq, e.get("role"))
            it.state = "running"
        elif t == SESSION_COMPLETED:
            it = item("session", e["path"], seq, e.get("role"))
            it.state = "completed"
        elif t == VALUE_RECORDED:
            it = item("value", e["key"], seq, e.get("kind", "value"))
            it.state = "recorded"
    for it in order:
        it.replayed = bool(resumed_at) and it.last_seq < resumed_at and it.state not in ("waiting",)
        it.at = written.get(it.last_seq)
    return order, resumed_at


def compensations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The compensations a run started, in the order they ran, from its events.

    Each: ``key`` (the original call's), ``state`` (``confirmed``, ``failed``,
    ``retrying`` or ``unconfirmed``: cut mid-call), ``attempts`` (its intents),
    and ``result`` or ``error`` (its last receipt's).
    """
    found: dict[str, dict[str, Any]] = {}
    for ev in events:
        key = ev.get("key") or ""
        if not key.startswith(COMPENSATE) or ev["type"] not in (EFFECT_INTENT, EFFECT_RECEIPT):
            continue
        c = found.setdefault(
            key,
            {
                "key": key[len(COMPENSATE) :],
                "state": "unconfirmed",
                "attempts": 0,
                "result": None,
                "error": None,
            },
        )
        if ev["type"] == EFFECT_INTENT:
            c["attempts"] += 1
            c["state"] = "retrying" if c["error"] is not None else "unconfirmed"
        elif ev.get("outcome") == "ok":
            c["state"], c["result"], c["error"] = "confirmed", ev.get("result"), None
        else:
            message = (ev.get("error_message") or "").splitlines()
            c["state"] = "failed"
            c["error"] = f"{(ev.get('error_type') or '').rsplit('.', 1)[-1]}: {message[0] if message else ''}"
    return list(found.values())


def runtime_view(world: WorldCore) -> dict[str, Any]:
    """Queues (runs per state) and drivers (who holds claims) from the runtime's control store."""
    data_dir = world.data_dir
    if data_dir is not None and not (data_dir / "runtime.db").exists():
        return {"queues": [], "drivers": []}
    ctl = control_of(world)
    recs = list(ctl.claimed()) + list(ctl.unstarted())
    queues: dict[str, dict[str, int]] = {}
    drivers: dict[str, dict[str, Any]] = {}
    for r in recs:
        q = queues.setdefault(r.queue or "(no queue)", {})
        q[r.state] = q.get(r.state, 0) + 1
        if r.state == "claimed" and r.owner:
            d = drivers.setdefault(r.owner, {"owner": r.owner, "pid": r.pid, "host": r.host, "runs": []})
            live = driver_of(world, r.run_id)["driver"] if world.log.info(r.run_id) else "not started"
            d["runs"].append({"run_id": r.run_id, "driver": live, "queue": r.queue})
    return {
        "queues": [{"name": k, "states": v} for k, v in sorted(queues.items())],
        "drivers": sorted(drivers.values(), key=lambda d: str(d["owner"])),
    }


def pending_messages(world: Any, run_id: str) -> list[dict[str, Any]]:
    """The messages sent to a run that it has not received yet (none where the world keeps none)."""
    try:
        store = world.open_messages()
    except DurableError:  # a world without a mailbox
        return []
    return [
        {"topic": m.topic, "sent_at": iso(m.sent_at), "value": m.data}
        for m in store.messages(run_id, pending=True)
    ]


def compare_runs(world: WorldCore, run_a: str, run_b: str) -> dict[str, Any]:
    """Two runs aligned by call path (``durable.ops._run_diff.align``), and where run B was forked from.

    Raises:
        RunNotFoundError: The world has no run with one of the ids.
        KeyMismatchError: A run's events are encrypted under a key the inspector does not hold.
    """
    a, b = read_calls(world, run_a), read_calls(world, run_b)
    started = b.recorded.started or {}
    return {
        "a": run_a,
        "b": run_b,
        "rows": align(a.calls, b.calls),
        "fork_of": started.get("fork_of"),
        "fork_seq": started.get("fork_seq"),
    }


def whole_value(world: WorldCore, run_id: str, path: str, part: str = "output") -> tuple[bool, Any]:
    """A call's whole output or input (``path=""``: the run's input and output); ``(False, None)`` when none.

    ``part="input"`` asks for the call's input, which logs of format 8 on record.

    Raises:
        RunNotFoundError: The world has no such run.
    """
    read = read_calls(world, run_id)
    if not path:
        started = read.recorded.started or {}
        term = read.recorded.terminal
        done = term is not None and term[0] == RUN_COMPLETED
        return True, {
            "input": started.get("input"),
            "output": term[1].get("output") if done and term else None,
        }
    call = read.calls.get(path)
    if call is None:
        return False, None
    if part == "input":
        return (True, call.input) if call.input_state == "recorded" else (False, None)
    return True, call.output
