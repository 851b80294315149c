"""What the inspector shows, read from a world: the run list, one run's timeline, queues and drivers.

Everything here takes a world and returns plain data; the pages
(``_pages``) turn it into HTML and the app (``_app``) serves it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from typing import Any

from ..engine import COMPENSATE, WorldCore, budget_text, recorded_budget, run_usage
from ..errors import DurableError, RunNotFoundError
from ..events import (
    DRIFT_ACCEPTED,
    EFFECT_INTENT,
    EFFECT_RECEIPT,
    INTERRUPT_RESUMED,
    RETRY_DECISION,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_RESOLVED,
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
from ..ops import align, checkpoints, first_seqs, read_calls
from ..runtime import control_of, driver_of, run_status, short_hash
from ..runtime import list_runs as runs_page
from ._timeline_item import Item as Item
from ._tree import build_tree

STATUSES = ("running", "orphaned", "waiting", "interrupted", "blocked", "completed", "failed", "cancelled")
"""The statuses the inspector tells apart: ``waiting`` is enqueued, ``orphaned`` running without a driver."""

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


def list_runs(
    world: WorldCore,
    *,
    status: str | None = None,
    workflow: str | None = None,
    search: str | None = None,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """Runs newest first with the inspector's status, filtered by status, workflow and a search text."""
    rows, _ = runs_page(world, status=None, workflow=None, limit=limit, offset=0)
    for r in rows:
        if r["status"] == "running" and r.get("parent_run_id") is not None:
            r["orphaned"] = driver_of(world, str(r["run_id"]))["driver"] == "orphaned"
        r["ui_status"] = _ui_status(r)
    needle = (search or "").strip().lower()
    out = []
    for r in rows:
        if status and r["ui_status"] != status:
            continue
        if workflow and r["workflow"] != workflow:
            continue
        if needle and needle not in str(r["run_id"]).lower() and needle not in str(r["workflow"]).lower():
            continue
        out.append(r)
    out.sort(key=lambda r: r.get("created_at") or 0, reverse=True)
    return out


def list_fingerprint(world: WorldCore) -> str:
    """Changes whenever a run of the list changes status or a run appears (what live updates watch)."""
    rows = list_runs(world)
    return json.dumps([(r["run_id"], r["ui_status"], r.get("updated_at")) for r in rows])


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


def run_detail(world: WorldCore, run_id: str) -> dict[str, Any]:
    """Everything the run page shows about one run.

    Raises:
        RunNotFoundError: The world has no such run.
    """
    info = world.log.info(run_id)
    if info is None:
        st = run_status(world, run_id)  # an enqueued run has no log yet
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
    events = [e.model_dump(mode="json") for e in world.events(run_id)]
    read = read_calls(world, run_id)
    rec = read.recorded
    items, resumed_at = timeline(events)
    started = rec.started or {}
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
    budget = recorded_budget(rec)
    spent = run_usage(world, run_id)
    usage = {
        "calls": spent.calls,
        "input_tokens": spent.input_tokens,
        "output_tokens": spent.output_tokens,
        "cost": round(spent.cost, 6),
    }
    resolutions = [
        {"decision": e["decision"], "key": e.get("key"), "by": e["by"], "when": iso(e["decided_at"])}
        for e in events
        if e["type"] == RUN_RESOLVED
    ]
    waiting = [
        {"path": p, "value": json.dumps(rec.interrupts[p].get("value"), default=str)}
        for p in rec.interrupts
        if p not in rec.answers
    ]
    now = world.clock()
    timers = [
        {"path": p, "wake_at": iso(t.get("wake_at")), "passed": float(t.get("wake_at") or 0) <= now}
        for p, t in rec.timers.items()
    ]
    try:
        cps = [{"seq": c.seq, "path": c.path} for c in checkpoints(run_id, world=world)]
    except DurableError:
        cps = []
    return {
        "messages": pending_messages(world, run_id),
        "run_id": run_id,
        "workflow": info.workflow,
        "status": status,
        "raw_status": st.status,
        "reason": st.reason,
        "queue": st.queue,
        "items": items,
        "tree": build_tree(read.calls, items, first_seqs(events)),
        "missing_artifacts": read.missing_artifacts,
        "events": events,
        "has_input": "input" in started,
        "input": started.get("input"),
        "has_output": terminal is not None,
        "output": terminal[1].get("output") if terminal else None,
        "fork_of": started.get("fork_of"),
        "fork_seq": started.get("fork_seq"),
        "last_seq": events[-1]["seq"] if events else 0,
        "unconfirmed": rec.unconfirmed(),
        "waiting": waiting,
        "timers": timers,
        "children": [it.child_run_id for it in items if it.child_run_id],
        "checkpoints": cps,
        "resumed_at": resumed_at,
        "error": error,
        "blocked": blocked,
        "usage": usage if spent.calls or budget is not None else None,
        "budget": None if budget is None else {"text": budget_text(budget), "json": budget.to_json()},
        "resolutions": resolutions,
        "compensations": compensations(events),
        "parent_run_id": info.parent_run_id,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "started_at": events[0].get("at") if events else None,
        "driver": driver,
        "code": short_hash(started.get("manifest_hash")),
        "code_detail": st.detail,
        "patches": sorted(rec.patches),
    }


def run_fingerprint(world: WorldCore, run_id: str) -> str:
    """Changes whenever the run writes an event or changes status."""
    info = world.log.info(run_id)
    try:
        status = run_status(world, run_id).status
    except RunNotFoundError:
        return "gone"
    rows = world.log.read(run_id)
    last = rows[-1][0] if rows else 0
    driver = driver_of(world, run_id)["driver"] if status == "running" else ""
    return f"{status}:{last}:{driver}:{info.updated_at if info else 0}"


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
