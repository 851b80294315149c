"""``durable.doctor(world)``: every run or entry that cannot make progress by itself, and its fix.

It lists blocked runs, runs whose driver is gone (orphaned: a claim held by
a dead worker, or a run no live process drives), runs waiting for code that
can replay them, enqueued runs that no worker has claimed for a long time,
and dead-lettered outbox entries. Each finding says why, in one line, what
will happen to it and when (an orphaned run that a live worker knows is
recovered within seconds; one cut inside a plain tool is blocked by its next
drive, so the resolutions are printed at once), and gives the commands that
move it again. It only reads.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..engine import WorldCore, recover_log, unsafe_unconfirmed
from ..store import ControlRecord, WorkerRecord
from ._driver import control_of
from ._handle import driver_of
from ._live_workers import live_workers
from ._outcome import FIRST, UNKNOWN_COMMIT, blocked_data, fixes, where_args, workflow_target
from ._serving import WAITING_FOR_CODE, Waiting, waiting_fixes
from ._start import CLAIM_GRACE, backoff
from ._worker import RECOVER_EVERY

STALE = 60.0
"""Seconds an enqueued run may wait unclaimed before ``doctor`` lists it."""

RECOVERING = "recovering"
"""Reason of an orphaned run that a live worker knows: it recovers the run within seconds."""

NO_WORKER = "no_worker"
"""Reason of a run that no live worker knows (orphaned), or whose queue none serves (unclaimed)."""

HELD_BACK = "held_back"
"""Reason of an enqueued run whose queue a live worker serves: the queue's limits hold it back."""

ATTEMPTS_EXHAUSTED = "attempts_exhausted"
"""Reason of an outbox entry that ran out of attempts."""


@dataclass(frozen=True)
class Finding:
    """One thing ``doctor`` found that cannot make progress by itself, or not yet.

    Attributes:
        kind: ``blocked``, ``dead_claim`` (claimed by a worker that is gone), ``unserved``
            (no live process drives it: its driver, a worker's or ``run_workflow``'s, died),
            ``waiting_for_code`` (the code of the live workers cannot replay it),
            ``unclaimed`` (enqueued, and no worker claimed it for ``stale`` seconds) or
            ``dead_outbox`` (an outbox entry that ran out of attempts).
        run_id: The run it concerns.
        reason: Why, in a word: a blocked run's reason (``unknown_commit``, ``nondeterminism``,
            ...); for an orphaned run ``recovering`` (a live worker recovers it within the
            seconds the message says), ``unknown_commit`` (a plain tool was cut: its next
            drive blocks it) or ``no_worker``; ``waiting_for_code``; for an unclaimed run
            ``held_back`` (a live worker serves its queue) or ``no_worker``;
            ``attempts_exhausted`` for an outbox entry.
        message: What is wrong and what happens next, in one sentence.
        fixes: The commands that fix it, the first one first (none when it fixes itself).
        workflow: The run's workflow, when known.
        key: The call it concerns (a cut tool's key, an outbox entry's), when there is one.
        when: What to do before the fixes (``after deploying code that matches the log``).
    """

    kind: str
    run_id: str
    reason: str
    message: str
    fixes: list[str] = field(default_factory=list)
    workflow: str | None = None
    key: str | None = None
    when: str | None = None

    def line(self) -> str:
        """The finding as ``little doctor`` prints it: one line with the reason and the fix."""
        return finding_line(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON data (``little doctor --json``)."""
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            "reason": self.reason,
            "workflow": self.workflow,
            "key": self.key,
            "message": self.message,
            "when": self.when,
            "fixes": list(self.fixes),
        }


def finding_line(finding: dict[str, Any]) -> str:
    """A finding's data (``Finding.as_dict``) as one line: the reason, what happens, the first fix."""
    when = f" ({finding['when']})" if finding.get("when") else ""
    fix = f"; fix{when}: {finding['fixes'][0]}" if finding["fixes"] else ""
    return f"{finding['run_id']}: {finding['kind']} ({finding['reason']}): {finding['message']}{fix}"


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
    live = live_workers(world)
    out: list[Finding] = []
    for rec in sorted(ctl.blocked_records(), key=lambda r: r.seq):
        why = blocked_data(world, rec.run_id, rec.blocked)
        reason = str(why.get("reason"))
        error = (why.get("error_message") or "").splitlines()[0:1]
        said = error[0] if error else "its drives were cut more often than max_recovery_attempts allows"
        how = fixes(world, rec.run_id, "blocked", why, rec.queue)
        key = why.get("key")
        out.append(
            Finding(
                "blocked",
                rec.run_id,
                reason,
                said,
                how,
                rec.workflow or None,
                None if key is None else str(key),
                FIRST.get(reason),
            )
        )
    out.extend(_orphans(world, ctl.claimed(), now, live))
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
                WAITING_FOR_CODE,
                f"{waiting.detail()}; no live worker whose code can replay it drives it",
                waiting_fixes(world, rec.run_id, waiting),
                rec.workflow,
            )
        )
    for rec in ctl.unstarted():
        if rec.state == "enqueued" and now - rec.created_at > stale:
            out.append(_unclaimed(world, rec, now, live))
    if world.keeps_outbox():
        for entry in world.open_outbox().entries("dead"):
            out.append(
                Finding(
                    "dead_outbox",
                    entry.run_id,
                    ATTEMPTS_EXHAUSTED,
                    f"outbox call of tool {entry.tool!r} ran out of attempts ({entry.error or 'no error'})",
                    [f"little outbox retry {shlex.quote(entry.key)}{where_args(world)}"],
                    key=entry.key,
                )
            )
    return out


def _orphans(
    world: WorldCore, claimed: list[ControlRecord], now: float, live: list[WorkerRecord]
) -> list[Finding]:
    """Running runs whose driver is gone (``little runs`` says orphaned), each with what happens next."""
    seen = {r.run_id: r for r in claimed if r.workflow}
    log_only = [
        i for i in world.log.runs(status="running") if i.parent_run_id is None and i.run_id not in seen
    ]
    known = control_of(world).records([i.run_id for i in log_only])
    for info in log_only:
        if info.run_id not in known:  # a run of run_workflow: driven now, or its process is gone
            seen[info.run_id] = ControlRecord(
                info.run_id, info.workflow, state="claimed", driven_at=info.updated_at
            )
    out = []
    for rid, rec in seen.items():
        if rec.owner and rec.driven_at is not None and now - rec.driven_at < CLAIM_GRACE:
            continue  # just claimed: its driver takes the run's lock now
        if driver_of(world, rid)["driver"] != "orphaned":
            continue
        out.append(_orphan(world, rec, now, live))
    return out


def _orphan(world: WorldCore, rec: ControlRecord, now: float, live: list[WorkerRecord]) -> Finding:
    """What happens to a run whose driver is gone, and when; and the commands that move it now."""
    rid, wf = rec.run_id, rec.workflow
    kind = "dead_claim" if rec.owner else "unserved"
    if rec.owner:
        where = f"pid {rec.pid} on {rec.host}" if rec.pid else "its process"
        gone = f"orphaned: claimed by {rec.owner} ({where}), which is gone"
    else:
        gone = "orphaned: its driver died and no live process drives it"
    if rec.drives > 1:
        gone += f" ({rec.drives} drives cut in a row)"
    unsafe = unsafe_unconfirmed(recover_log(world.log, rid))
    if unsafe:
        key = unsafe[0]
        return Finding(
            kind,
            rid,
            UNKNOWN_COMMIT,
            f"{gone} while plain tool call {key!r} was in flight, so its next drive blocks it "
            f"(unknown_commit): look for idempotency key {rid}:{key} in the external system and "
            "decide now",
            fixes(world, rid, "blocked", {"reason": UNKNOWN_COMMIT, "key": key}, rec.queue),
            wf,
            key,
        )
    serving = [w for w in live if wf in w.workflows]
    if serving:
        w = serving[0]
        beat = getattr(world.locks, "heartbeat", None)  # a Postgres world's workers pass less often
        every = RECOVER_EVERY if beat is None else max(RECOVER_EVERY, beat / 2)
        due = (rec.driven_at or now) + backoff(rec.drives) if rec.owner or rec.drives else now
        within = math.ceil(max(due - now, 0.0) + every + CLAIM_GRACE)
        return Finding(
            kind,
            rid,
            RECOVERING,
            f"{gone}; worker {w.name} (pid {w.pid} on {w.host}), which knows workflow {wf!r}, "
            f"recovers it within {within} s",
            [],
            wf,
        )
    return Finding(
        kind,
        rid,
        NO_WORKER,
        f"{gone}, and no live worker knows workflow {wf!r}: start one, and it recovers the run at once",
        [_worker_command(world, rid, wf), f"little cancel {shlex.quote(rid)}{where_args(world)}"],
        wf,
    )


def _unclaimed(world: WorldCore, rec: ControlRecord, now: float, live: list[WorkerRecord]) -> Finding:
    waited = f"enqueued on queue {rec.queue!r} {now - rec.created_at:.0f} s ago and no worker claimed it"
    cancel = f"little cancel {shlex.quote(rec.run_id)}{where_args(world)}"
    serving = [w for w in live if rec.queue in w.queues and rec.workflow in w.workflows]
    if serving:
        names = ", ".join(w.name for w in serving)
        return Finding(
            "unclaimed",
            rec.run_id,
            HELD_BACK,
            f"{waited}; worker {names} serves the queue, so its limits hold the run back (the runs "
            "in flight, its rate limit, or another run of its partition): it starts when they allow",
            [cancel],
            rec.workflow,
        )
    return Finding(
        "unclaimed",
        rec.run_id,
        NO_WORKER,
        f"{waited}, and no live worker serves queue {rec.queue!r} with workflow {rec.workflow!r}",
        [_worker_command(world, rec.run_id, rec.workflow, rec.queue), cancel],
        rec.workflow,
    )


def _worker_command(world: WorldCore, run_id: str, workflow: str, queue: str | None = None) -> str:
    """``little worker MODULE:FUNCTION`` for the run's workflow, as its manifest names the code."""
    target = workflow_target(world, run_id) or "MODULE:FUNCTION"
    q = f" --queue {shlex.quote(queue)}" if queue else ""
    return f"little worker {shlex.quote(target)}{q}{where_args(world)}"
