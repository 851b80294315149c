"""``durable.doctor(world)``: every run or entry that cannot make progress by itself, and its fix.

It lists blocked runs, runs that no live process drives and no live worker
recovered (a claim held by a dead worker, or a run whose workflow no live
worker serves), runs waiting for code that can replay them, enqueued runs
that no worker has claimed for a long time, and dead-lettered outbox
entries. Each finding says why, in one line, and gives the commands that
move it again. It only reads.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from ..engine import WorldCore
from ..store import ControlRecord
from ._driver import control_of
from ._outcome import blocked_data, fixes, where_args, workflow_target
from ._serving import WAITING_FOR_CODE, Waiting, waiting_fixes
from ._start import CLAIM_GRACE, backoff

STALE = 60.0
"""Seconds an enqueued run may wait unclaimed before ``doctor`` lists it."""

ORPHAN_GRACE = 5.0
"""Seconds past its recovery backoff a run may go without a live driver before ``doctor`` lists it."""


@dataclass(frozen=True)
class Finding:
    """One thing ``doctor`` found that cannot make progress by itself.

    Attributes:
        kind: ``blocked``, ``dead_claim`` (claimed by a worker that is gone, and no
            live worker recovered it), ``unserved`` (no live process drives it and no
            live worker that knows its workflow recovered it), ``waiting_for_code`` (the
            code of the live workers cannot replay it), ``unclaimed`` (enqueued,
            and no worker claimed it for ``stale`` seconds) or ``dead_outbox`` (an
            outbox entry that ran out of attempts).
        run_id: The run it concerns.
        reason: Why, in a word: a blocked run's reason, the workflow, or the outbox key.
        message: What is wrong, in one sentence.
        fixes: The commands that fix it, the first one first.
    """

    kind: str
    run_id: str
    reason: str
    message: str
    fixes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The finding as ``little doctor`` prints it: one line with the reason and the fix."""
        fix = f"; fix: {self.fixes[0]}" if self.fixes else ""
        return f"{self.run_id}: {self.kind} ({self.reason}): {self.message}{fix}"

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON data (``little doctor --json``)."""
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            "reason": self.reason,
            "message": self.message,
            "fixes": list(self.fixes),
        }


def doctor(world: WorldCore, *, stale: float = STALE) -> list[Finding]:
    """Every run or entry of ``world`` that cannot make progress by itself, with its fix.

    Args:
        world: The world to look at.
        stale: Seconds an enqueued run may wait unclaimed before it is listed.

    Returns:
        The findings, blocked runs first; an empty list for a healthy world.

    Example:
        >>> import durable
        >>> durable.doctor(durable.memory_world())
        []
    """
    ctl = control_of(world)
    now = world.clock()
    out: list[Finding] = []
    for rec in sorted(ctl.blocked_records(), key=lambda r: r.seq):
        why = blocked_data(world, rec.run_id, rec.blocked)
        reason = str(why.get("reason"))
        error = (why.get("error_message") or "").splitlines()[0:1]
        said = error[0] if error else "its drives were cut more often than max_recovery_attempts allows"
        how = fixes(world, rec.run_id, "blocked", why, rec.queue)
        out.append(Finding("blocked", rec.run_id, reason, said, how))
    out.extend(_undriven(world, ctl.claimed(), now))
    for rec in sorted(ctl.waiting_records(), key=lambda r: r.seq):
        lock = world.locks.try_acquire(f"run:{rec.run_id}")
        if lock is None:
            continue  # a worker whose code matches is taking it now
        world.locks.release(lock)
        waiting = Waiting.of(rec)
        out.append(
            Finding(
                WAITING_FOR_CODE,
                rec.run_id,
                rec.workflow,
                f"{waiting.detail()}; no live worker whose code can replay it drives it",
                waiting_fixes(world, rec.run_id, waiting),
            )
        )
    for rec in ctl.unstarted():
        if rec.state == "enqueued" and now - rec.created_at > stale:
            out.append(_unclaimed(world, rec, now))
    if world.keeps_outbox():
        for entry in world.open_outbox().entries("dead"):
            key = shlex.quote(entry.key)
            out.append(
                Finding(
                    "dead_outbox",
                    entry.run_id,
                    entry.key,
                    f"outbox call of tool {entry.tool!r} ran out of attempts ({entry.error or 'no error'})",
                    [f"little outbox retry {key}{where_args(world)}"],
                )
            )
    return out


def _undriven(world: WorldCore, claimed: list[ControlRecord], now: float) -> list[Finding]:
    """Running runs with no live driver long after their recovery was due."""
    seen = {r.run_id: r for r in claimed if r.workflow}
    log_only = [
        i for i in world.log.runs(status="running") if i.parent_run_id is None and i.run_id not in seen
    ]
    known = control_of(world).records([i.run_id for i in log_only])
    for info in log_only:
        if info.run_id not in known:  # a run of run_workflow whose process is gone
            seen[info.run_id] = ControlRecord(
                info.run_id, info.workflow, state="claimed", driven_at=info.updated_at
            )
    out = []
    for rid, rec in seen.items():
        due = (rec.driven_at or 0.0) + backoff(rec.drives) + CLAIM_GRACE + ORPHAN_GRACE
        if now < due:
            continue
        lock = world.locks.try_acquire(f"run:{rid}")
        if lock is None:
            continue  # a live driver holds it
        world.locks.release(lock)
        worker = _worker_command(world, rid, rec.workflow)
        cancel = f"little cancel {shlex.quote(rid)}{where_args(world)}"
        if rec.owner:
            where = f"pid {rec.pid} on {rec.host}" if rec.pid else "its process"
            out.append(
                Finding(
                    "dead_claim",
                    rid,
                    rec.workflow,
                    f"claimed by worker {rec.owner} ({where}), which is gone; no live worker that "
                    f"knows workflow {rec.workflow!r} recovered it",
                    [worker, cancel],
                )
            )
        else:
            out.append(
                Finding(
                    "unserved",
                    rid,
                    rec.workflow,
                    f"no live process drives it and no live worker knows workflow {rec.workflow!r}",
                    [worker, cancel],
                )
            )
    return out


def _unclaimed(world: WorldCore, rec: ControlRecord, now: float) -> Finding:
    worker = _worker_command(world, rec.run_id, rec.workflow, rec.queue)
    return Finding(
        "unclaimed",
        rec.run_id,
        rec.workflow,
        f"enqueued on queue {rec.queue!r} {now - rec.created_at:.0f} s ago and no worker claimed it "
        f"(is a worker serving queue {rec.queue!r} with workflow {rec.workflow!r} running?)",
        [worker, f"little cancel {shlex.quote(rec.run_id)}{where_args(world)}"],
    )


def _worker_command(world: WorldCore, run_id: str, workflow: str, queue: str | None = None) -> str:
    """``little worker MODULE:FUNCTION`` for the run's workflow, as its manifest names the code."""
    target = workflow_target(world, run_id) or "MODULE:FUNCTION"
    q = f" --queue {shlex.quote(queue)}" if queue else ""
    return f"little worker {shlex.quote(target)}{q}{where_args(world)}"
