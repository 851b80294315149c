"""What ``little runs`` adds from the runtime: enqueued runs, drivers, cancellation reasons."""

from __future__ import annotations

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


def code_version(world: WorldCore, run_id: str) -> str | None:
    """The run's code version: its recorded manifest hash, short (one read of its first row).

    ``None`` when the run has not started, or its first row is damaged (``little verify`` names it).
    """
    try:
        started = first_started(world, run_id)
    except ValueError:
        return None
    if not isinstance(started, dict):
        return None
    tag = started.get("manifest_hash")
    return short_hash(tag) if isinstance(tag, str) else None


def list_runs(
    world: WorldCore, *, status: str | None, workflow: str | None, limit: int | None, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """The rows of ``little runs``, newest first, and how many runs the page left out.

    The runs come from one query of the log and one of the control store (runs
    that never started); only the rows shown are completed with their
    control records (one query) and the drivers of running runs.
    """
    shared = keeps_control(world)
    entries: list[RunInfo | ControlRecord] = list(world.runs(status=status, workflow=workflow))
    if shared and status in (None, "enqueued", "cancelled"):
        known = {e.run_id for e in entries}
        waiting = [
            rec
            for rec in control_of(world).unstarted()
            if rec.run_id not in known
            and (workflow is None or rec.workflow == workflow)
            and (status is None or reconciled(None, rec) == status)
        ]
        if waiting:
            entries = sorted([*entries, *waiting], key=lambda e: -e.created_at)  # stable: log order on ties
    page = entries[offset:] if limit is None else entries[offset : offset + limit]
    return _detail(world, page, shared), len(entries) - len(page)


def _detail(world: WorldCore, page: list[RunInfo | ControlRecord], shared: bool) -> list[dict[str, Any]]:
    """Rows of the page with the runtime's status, reason, queue and the driver of running runs."""
    recs = control_of(world).records([e.run_id for e in page]) if shared else {}
    rows = []
    for e in page:
        if isinstance(e, ControlRecord):
            rows.append(_waiting_row(e))
            continue
        r = _row(e)
        r["code"] = code_version(world, e.run_id)
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
