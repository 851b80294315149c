"""Recovery and log maintenance: ``recover``, ``compact``, ``gc`` and ``vacuum``.

``recover`` is the one function that turns a run's log into its canonical
state; the runner resumes from it. ``compact`` writes that state as a
``snapshot`` event and drops every event before it in one transaction, so
recovery from the compacted log equals recovery from the full log. ``gc``
deletes finished runs older than a given age, except those an unfinished run
still depends on, with every trace of them (control record, messages,
outbox entries, unshared artifacts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from ..engine import (
    Recorded,
    RunContext,
    WorldCore,
    compensated_keys,
    encode_state,
    recover_log,
    referenced,
    run_not_found,
)
from ..engine import payloads as ev
from ..errors import ConfigurationError, DurableError, RunFailedError
from ..events import RUN_CANCELLED, RUN_INTERRUPTED
from ..store import (
    TERMINAL,
    RunControl,
    RunInfo,
    SqliteControl,
)
from ._call_inputs import input_artifacts, read_inputs, self_contained


@contextlib.contextmanager
def locked(world: WorldCore, run_id: str, what: str) -> Iterator[int]:
    """Hold the run's lock and a fresh fencing token, or fail at once when a driver holds it.

    Raises:
        RunFailedError: Another caller is driving the run right now (reason ``run_busy``).
    """
    handle = world.locks.try_acquire(f"run:{run_id}")
    if handle is None:
        raise RunFailedError(
            f"cannot {what} run {run_id!r}: another caller is driving it right now. "
            "Wait until it stops, then try again.",
            cause_code="runtime_config_error",
            reason="run_busy",
            run_id=run_id,
        )
    try:
        yield world.log.fence(run_id)
    finally:
        world.locks.release(handle)


@dataclass(frozen=True)
class Compaction:
    """What ``compact`` did.

    Attributes:
        run_id: The run.
        snapshot_seq: The seq of the new ``snapshot`` event (its base seq).
        removed: How many events it replaced.
        state_hash: The hash of the state it holds.
    """

    run_id: str
    snapshot_seq: int
    removed: int
    state_hash: str


def compact(run_id: str, *, world: WorldCore) -> Compaction:
    """Replace a run's events with one ``snapshot`` of its canonical state.

    The snapshot is appended and every event before it removed in one
    transaction: a crash leaves either the old log or the compacted one.
    Recovery (and so a resume) gives the same state afterwards. Checkpoints
    before the snapshot are gone; the snapshot itself becomes the oldest
    checkpoint. Call ``world.vacuum()`` to give the space back to the disk.

    Args:
        run_id: The run to compact (not one being driven right now).
        world: The world holding its log.

    Returns:
        The snapshot's seq, how many events it replaced and its state hash.

    Raises:
        RunNotFoundError: The world has no run with that id.
        RunFailedError: Another caller is driving the run right now.
    """
    with locked(world, run_id, "compact") as token:
        rows = world.log.read(run_id)
        if not rows:
            raise run_not_found(world, run_id)
        rec = Recorded.from_rows(rows, run_id)
        self_contained(rec, read_inputs(world, run_id, rows))  # the dropped events held some bases
        seq = rows[-1][0] + 1
        digest = rec.state_hash()
        data = ev.snapshot(encode_state(rec.to_state()), digest, seq)
        world.log.compact(run_id, (seq, "snapshot", ev.text(data)), token)
    return Compaction(run_id, seq, len(rows), digest)


def _seconds(older_than: float | timedelta) -> float:
    value = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigurationError(
            f"older_than must be a non-negative number of seconds or a timedelta, not {older_than!r}."
        )
    return float(value)


def _needed(runs: list[RunInfo]) -> set[str]:
    """The finished runs that an unfinished run depends on: its child runs, at any depth.

    A parent killed after its child finished but before it recorded the
    child's result resumes by driving the child again, which then replays
    the child's log; without that log the child would run from scratch and
    its plain tools would run twice.
    """
    by_id = {i.run_id: i for i in runs}
    needed: set[str] = set()
    for info in runs:
        if info.status not in TERMINAL or info.run_id in needed:
            continue
        chain = [info.run_id]
        parent = by_id.get(info.parent_run_id or "")
        while parent is not None and parent.run_id not in chain:
            if parent.status not in TERMINAL or parent.run_id in needed:
                needed.update(chain)
                break
            chain.append(parent.run_id)
            parent = by_id.get(parent.parent_run_id or "")
    return needed


def gc(
    *,
    world: WorldCore,
    older_than: float | timedelta,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Delete finished runs (completed, failed or cancelled) not updated for ``older_than``.

    A run goes with every trace of it: its log, its control record (queue
    claim, dedup id, cancel request), its messages, its outbox entries and the
    artifacts that no run left in the world references. Afterwards
    ``durable.handle`` raises ``RunNotFoundError`` for it, and a run started
    with the same id is a new run. Runs cancelled while still enqueued (a
    control record and no log) go too.

    Running and interrupted runs are kept whatever their age, and so is every
    run one of them depends on (its child runs, at any depth) and a run some
    caller is driving right now. Call ``world.vacuum()`` afterwards to give
    the space back to the disk.

    Args:
        world: The world to clean.
        older_than: The age (seconds or a ``timedelta``) past which a finished run goes.
        dry_run: Only list what would be deleted.
        progress: Called with (runs handled, runs to handle) once the runs to
            delete are known (``(0, n)``) and again after each one, deleted or
            kept because a caller drives it (a dry run deletes nothing and
            never calls it); ``little gc`` draws its bar from it.

    Returns:
        The ids of the runs deleted (or that would be), oldest first.

    Raises:
        ConfigurationError: ``older_than`` is negative or not a duration.
    """
    cutoff = world.clock() - _seconds(older_than)
    runs = world.log.runs()
    keep = _needed(runs)
    doomed = sorted(
        (i for i in runs if i.status in TERMINAL and i.updated_at < cutoff and i.run_id not in keep),
        key=lambda i: (i.updated_at, i.run_id),
    )
    control = _control_store(world)
    never_started = (
        []
        if control is None
        else [
            r.run_id
            for r in control.unstarted()
            if r.state == "cancelled" and r.created_at < cutoff and world.log.info(r.run_id) is None
        ]
    )
    if dry_run:
        return [i.run_id for i in doomed] + never_started
    report = progress or (lambda done, total: None)
    report(0, len(doomed))
    deleted: list[str] = []
    orphans: set[str] = set()
    artifacts = _holds_artifacts(world)
    many = getattr(world.log, "delete_runs", None)  # a log that deletes many runs in one transaction
    size = GC_BATCH if many is not None else 1
    for start in range(0, len(doomed), size):
        batch = [i.run_id for i in doomed[start : start + size]]
        with _unheld(world, batch) as free:
            if artifacts:
                for run_id in free:
                    with contextlib.suppress(DurableError):  # a damaged log: nothing it names is trusted
                        orphans.update(_artifacts_of(world, run_id))
            if many is None:
                for run_id in free:
                    _delete_run(world, control, run_id)
                deleted += free
            else:
                gone = many(free)  # the log first: a cut gc leaves control records, which the next one finds
                if control is not None:
                    control.delete(gone)
                deleted += gone
        for done in range(start + 1, start + len(batch) + 1):
            report(done, len(doomed))
    truncate = getattr(world.log, "truncate_wal", None)
    if truncate is not None and len(deleted) >= GC_BATCH:
        truncate()  # a large delete grew the WAL: give its space back now
    if control is not None and never_started:
        control.delete(never_started)
        deleted.extend(never_started)
    if orphans:
        _delete_artifacts(world, orphans)
    return deleted


GC_BATCH = 1000
"""Runs ``gc`` deletes in one transaction, where the log can."""


@contextlib.contextmanager
def _unheld(world: WorldCore, run_ids: list[str]) -> Iterator[list[str]]:
    """The runs of ``run_ids`` that no driver holds, held by this ``gc`` until the block ends.

    Leases that a store can check for many runs in one query (Postgres) are
    checked so, and checked again by the log's delete in its transaction;
    other locks are taken one by one (a file lock each: local and cheap).
    """
    free = getattr(world.locks, "free", None)
    if free is not None and getattr(world.log, "delete_runs", None) is not None:
        open_ = free([f"run:{r}" for r in run_ids])
        yield [r for r in run_ids if f"run:{r}" in open_]
        return
    held = []
    try:
        for run_id in run_ids:
            handle = world.locks.try_acquire(f"run:{run_id}")
            if handle is not None:
                held.append((run_id, handle))
        yield [r for r, _ in held]
    finally:
        for _, handle in held:
            world.locks.release(handle)


def _holds_artifacts(world: WorldCore) -> bool:
    """Whether the world's artifact store may hold a payload (only then are the doomed runs' logs read)."""
    holds = getattr(world.artifacts, "holds_any", None)  # a store of another program may not tell
    return holds is None or bool(holds())


def _control_store(world: WorldCore) -> RunControl | None:
    """The world's control records: its own, or ``runtime.db`` beside the log when it exists."""
    if (
        world.control_store is None
        and world.data_dir is not None
        and (world.data_dir / "runtime.db").exists()
    ):
        world.control_store = SqliteControl(world.data_dir / "runtime.db")
    return world.control_store


def _delete_run(world: WorldCore, control: RunControl | None, run_id: str) -> None:
    """Every trace of one run; the log goes last, so a cut gc leaves a run the next gc finds."""
    if control is not None:
        control.delete([run_id])
    if world.keeps_outbox():
        world.open_outbox().delete_run(run_id)
    with contextlib.suppress(ConfigurationError):  # a log that keeps no messages
        world.open_messages().delete_run(run_id)
    world.log.delete_run(run_id)


def _artifacts_of(world: WorldCore, run_id: str) -> set[str]:
    """The hashes of the artifacts a run's log references."""
    rec = recover_log(world.log, run_id)
    outputs = {ref.sha256 for ref, _ in referenced(rec, run_id)}
    return outputs | input_artifacts(rec, run_id, world.log.read(run_id))


def _delete_artifacts(world: WorldCore, candidates: set[str]) -> None:
    """Delete the candidates that no run left in the world references."""
    for info in world.log.runs():
        try:
            candidates -= _artifacts_of(world, info.run_id)
        except DurableError:
            return  # a kept run whose log cannot be read: delete nothing it might reference
        if not candidates:
            return
    delete = getattr(world.artifacts, "delete", None)  # a store of another program may not delete
    if delete is not None:
        for sha in sorted(candidates):
            delete(sha)


def record_cancelled(world: WorldCore, run_id: str, reason: str) -> bool:
    """Append ``run.cancelled`` to a run nobody drives; the caller holds the run's lock.

    Used for a run that waits at an interrupt or whose driver died: no driver
    will see the request, so the canceller closes the run itself, under the
    run's lock and a fresh fencing token like any driver. Returns whether it
    wrote (``False`` when the run has finished or does not exist).
    """
    token = world.log.fence(run_id)
    rec = recover_log(world.log, run_id)
    if rec.started is None or (rec.terminal is not None and rec.terminal[0] != RUN_INTERRUPTED):
        return False
    run = RunContext(world, run_id, token, rec, {})
    # The undos a drive that died before the run's end confirmed are the run's (its failure's) own.
    run.emit(RUN_CANCELLED, ev.run_cancelled(reason, compensated_keys(rec.receipts)))
    run.flush(status="cancelled")
    return True
