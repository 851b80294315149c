"""What ``little runs`` adds from the runtime: enqueued runs, drivers, cancellation reasons."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..engine import WorldCore, first_started
from ..store import ControlRecord, RunInfo
from ._driver import control_of, keeps_control
from ._handle import driver_of
from ._serving import WAITING_FOR_CODE, short_hash
from ._status import reconciled, status_of


def _driver_text(d: dict[str, Any]) -> str:
    where = " ".join(x for x in (f"pid {d['pid']}" if d.get("pid") else "", d.get("host") or "") if x)
    return f"{d['driver']}" + (f" ({where})" if where else "")


def _row(i: RunInfo) -> dict[str, Any]:
    return {
        "run_id": i.run_id,
        "workflow": i.workflow,
        "status": i.status,
        "parent_run_id": i.parent_run_id,
        "created_at": i.created_at,
        "updated_at": i.updated_at,
    }


def _waiting_row(rec: ControlRecord) -> dict[str, Any]:
    return {
        "run_id": rec.run_id,
        "workflow": rec.workflow,
        "status": reconciled(None, rec),
        "parent_run_id": None,
        "created_at": rec.created_at,
        "updated_at": rec.created_at,
        "queue": rec.queue,
        "reason": rec.cancel_reason,
        "driver": f"(queue {rec.queue})" if rec.state == "enqueued" else f"({rec.cancel_reason})",
    }


def code_version(world: WorldCore, info: RunInfo) -> str | None:
    """The run's code version, short: kept in its summary, else its recorded manifest hash.

    A run written before the summary kept it is read from its first row;
    ``None`` when the run has not started, or that row is damaged (``little
    verify`` names it).
    """
    if info.code is not None:
        return short_hash(info.code)
    try:
        started = first_started(world, info.run_id)
    except ValueError:
        return None
    if not isinstance(started, dict):
        return None
    tag = started.get("manifest_hash")
    return short_hash(tag) if isinstance(tag, str) else None


def list_runs(
    world: WorldCore,
    *,
    status: str | None,
    workflow: str | None,
    limit: int | None,
    offset: int,
    count: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """The rows of ``little runs``, newest first, and how many runs the page left out.

    The log pages and filters in the database (the newest ``offset + limit``
    summaries, and one count); the runs only the control store can place
    (never started, or blocked: live work, few) are merged in. Only the rows
    shown are completed with their control records (one query) and the
    drivers of running runs; no run's log is read. ``count=False`` only
    tells whether older runs are left out (1 for some): one more summary
    read instead of a count, for a page that only links to the next one.
    """
    shared = keeps_control(world)
    extra = _held(world, status, workflow) if shared else []
    end = None if limit is None else offset + limit
    ask = end if end is None or count else end + 1
    logged = [] if status == "blocked" else world.runs(status=status, workflow=workflow, limit=ask)
    entries = _merged(logged, extra)
    page = entries[offset:end]
    if limit is None or status == "blocked" or not count:
        total = len(entries) if count or end is None else min(len(entries), end + 1)
    else:
        total = world.log.count(status=status, workflow=workflow) + len(extra)
    return _shown(world, page, shared, status), total - len(page)


def iter_runs(
    world: WorldCore, *, status: str | None, workflow: str | None, chunk: int = 500
) -> Iterator[dict[str, Any]]:
    """Every row of ``little runs``, newest first, a page at a time (read by key, never the whole table)."""
    shared = keeps_control(world)
    extra = _held(world, status, workflow) if shared else []
    before: tuple[float, str] | None = None
    while True:
        got = (
            []
            if status == "blocked"
            else world.runs(status=status, workflow=workflow, limit=chunk, before=before)
        )
        floor = got[-1].created_at if len(got) == chunk else float("-inf")
        yield from _shown(world, _merged(got, [e for e in extra if e.created_at >= floor]), shared, status)
        extra = [e for e in extra if e.created_at < floor]
        if len(got) < chunk:
            return
        before = (got[-1].created_at, got[-1].run_id)


def _merged(logged: list[RunInfo], extra: list[RunInfo | ControlRecord]) -> list[RunInfo | ControlRecord]:
    """The log's runs with the control store's, newest first (stable: log order on ties)."""
    known = {i.run_id for i in logged}
    entries: list[RunInfo | ControlRecord] = [*logged, *(e for e in extra if e.run_id not in known)]
    return sorted(entries, key=lambda e: -e.created_at) if extra else entries


def _shown(
    world: WorldCore, page: list[RunInfo | ControlRecord], shared: bool, status: str | None
) -> list[dict[str, Any]]:
    """The page's rows; with a status asked, only those whose reconciled status is it."""
    rows = _detail(world, page, shared)
    return rows if status is None else [r for r in rows if r["status"] == status]


def _held(world: WorldCore, status: str | None, workflow: str | None) -> list[RunInfo | ControlRecord]:
    """The runs only the control store can place in a listing: never started, or blocked.

    Enqueued runs and runs cancelled before a worker took them have no
    summary in the log; a blocked run's log says it runs or was interrupted.
    Both are live work (few), read by their state.
    """
    ctl = control_of(world)
    out: list[RunInfo | ControlRecord] = []
    if status in (None, "enqueued", "cancelled"):
        out += [
            rec
            for rec in ctl.unstarted()
            if (workflow is None or rec.workflow == workflow)
            and (status is None or reconciled(None, rec) == status)
            and world.log.info(rec.run_id) is None
        ]
    if status == "blocked":
        for rec in ctl.blocked_records():
            info = world.log.info(rec.run_id)
            if info is not None and (workflow is None or info.workflow == workflow):
                out.append(info)
    return out


def _detail(world: WorldCore, page: list[RunInfo | ControlRecord], shared: bool) -> list[dict[str, Any]]:
    """Rows of the page with the runtime's status, reason, queue and the driver of running runs."""
    recs = control_of(world).records([e.run_id for e in page]) if shared else {}
    rows = []
    for e in page:
        if isinstance(e, ControlRecord):
            rows.append(_waiting_row(e))
            continue
        r = _row(e)
        r["code"] = code_version(world, e)
        rec = recs.get(e.run_id)
        if rec is not None or e.status in ("cancelled", "failed"):
            st = status_of(world, e.run_id, e, rec)
            r["status"], r["reason"], r["queue"] = st.status, st.reason, st.queue
            if st.compensated:
                r["compensated"] = len(st.compensated)
        if r.get("reason") == WAITING_FOR_CODE:
            r["driver"] = "(no live worker's code can replay it)"
        elif r["status"] == "running" and r["parent_run_id"] is None:
            d = driver_of(world, r["run_id"])
            r["driver"] = _driver_text(d)
            if shared:
                r["driver_pid"], r["driver_host"] = d["pid"], d["host"]
                r["orphaned"] = d["driver"] == "orphaned"
        elif r["status"] == "cancelled" and r.get("reason"):
            r["driver"] = f"({r['reason']})"
        if r.get("compensated"):
            r["driver"] = f"{r.get('driver') or ''} (compensated {r['compensated']})".strip()
        rows.append(r)
    return rows
