"""What ``little runs`` adds from the runtime: enqueued runs, drivers, cancellation reasons."""

from __future__ import annotations

from typing import Any

from .._world import WorldCore
from ..runtime._driver import control_of
from ..runtime._handle import driver_of
from ..runtime._status import run_status


def _driver_text(d: dict[str, Any]) -> str:
    where = " ".join(x for x in (f"pid {d['pid']}" if d.get("pid") else "", d.get("host") or "") if x)
    return f"{d['driver']}" + (f" ({where})" if where else "")


def runtime_detail(
    world: WorldCore, rows: list[dict[str, Any]], status: str | None, workflow: str | None
) -> list[dict[str, Any]]:
    """Rows of ``little runs`` with the driver of running runs and the runtime's statuses."""
    data_dir = world.data_dir
    shared = "control" in world.extensions  # a Postgres world's control store is always there
    if not shared and (data_dir is None or not (data_dir / "runtime.db").exists()):
        for r in rows:
            if r["status"] == "running":
                r["driver"] = _driver_text(driver_of(world, r["run_id"]))
        return rows
    ctl = control_of(world)
    recs = ctl.records([r["run_id"] for r in rows])
    for r in rows:
        rec = recs.get(r["run_id"])
        st = run_status(world, r["run_id"]) if rec is not None else None
        if st is not None:
            r["status"] = st.status
            r["reason"] = st.reason
            r["queue"] = st.queue
        if r["status"] == "running" and r["parent_run_id"] is None:
            d = driver_of(world, r["run_id"])
            r["driver"] = _driver_text(d)
            r["driver_pid"], r["driver_host"], r["orphaned"] = d["pid"], d["host"], d["driver"] == "orphaned"
        elif r["status"] == "cancelled" and r.get("reason"):
            r["driver"] = f"({r['reason']})"
    if status in (None, "enqueued", "cancelled"):
        known = {r["run_id"] for r in rows}
        for rec in _waiting(ctl):
            if rec.run_id in known or (workflow is not None and rec.workflow != workflow):
                continue
            if status is not None and rec.state != status:
                continue
            rows.append(
                {
                    "run_id": rec.run_id,
                    "workflow": rec.workflow,
                    "status": rec.state,
                    "parent_run_id": None,
                    "created_at": rec.created_at,
                    "updated_at": rec.created_at,
                    "queue": rec.queue,
                    "reason": rec.cancel_reason,
                    "driver": f"(queue {rec.queue})" if rec.state == "enqueued" else f"({rec.cancel_reason})",
                }
            )
    return rows


def _waiting(ctl: Any) -> list[Any]:
    """Control records of runs that never started: enqueued, or cancelled while enqueued."""
    return list(ctl.unstarted())
