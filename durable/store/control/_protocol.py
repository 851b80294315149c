"""The runtime's control records: queues, claims, cancellation requests, deadlines, dedup ids.

A run's own log says what the run did; its control record says who may
drive it and what was asked of it from outside (a cancellation, a resume).
The driver holds the run's fencing token, so requests from other processes
never write to the run's log: they go here, and the driver reads them at its
next durable point. ``MemoryControl`` keeps the records in the process;
``SqliteControl`` (``runtime.db`` beside ``events.db``) shares them between
processes, so queue limits hold across workers. A Postgres world implements
the same protocol.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

KINDS = {"run:": "r", "cancel:": "c", "queue:": "q", "free:": "f"}
"""The letter of each kind of announcement that ``RunControl.subscribe`` names."""


def kinds_of(about: Collection[str]) -> frozenset[int] | None:
    """The kinds of announcement (``KINDS``, as bytes) that wake a subscriber to ``about``.

    ``None`` wakes it at every announcement: no entry, or an entry of no known
    kind. ``run:<id>`` wakes at every ``r``, whatever the run, in the stores
    whose announcements name no run (SQLite's doorbell, the memory store).
    """
    out: set[int] = set()
    for entry in about:
        kind = KINDS.get(entry.partition(":")[0] + ":")
        if kind is None:
            return None
        out.add(ord(kind))
    return frozenset(out) if out else None


def announcing(kinds: str) -> Callable[[F], F]:
    """After the method's transaction, tell the store's listeners what kind of change it made.

    Args:
        kinds: Letters of ``KINDS``: ``q`` new work on a queue, ``f`` a queue's
            slot freed, ``r`` a run's state or outcome changed, ``c`` a
            cancellation was asked for.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = method(self, *args, **kwargs)
            self._announce(kinds)
            return out

        return cast(F, wrapper)

    return decorate


def adopted(old: ControlRecord, workflow: str, owner: str, pid: int, host: str, now: float) -> ControlRecord:
    """``old`` claimed by a driver (``RunControl.adopt``): a claim that stands keeps its time."""
    claimed_at = old.claimed_at if old.state == "claimed" and old.claimed_at else now
    return changed(
        old,
        workflow=old.workflow or workflow,
        state="claimed",
        owner=owner,
        pid=pid,
        host=host,
        claimed_at=claimed_at,
        drives=old.drives + 1,
        driven_at=now,
    )


def claimed_by(old: ControlRecord, owner: str, pid: int, host: str, now: float) -> ControlRecord:
    """``old`` claimed from its queue by a worker: one more drive begins."""
    return changed(
        old,
        state="claimed",
        owner=owner,
        pid=pid,
        host=host,
        claimed_at=now,
        drives=old.drives + 1,
        driven_at=now,
    )


def reopened(old: ControlRecord, state: str, resume: str | None) -> ControlRecord:
    """``old`` put back by ``reopen``: nobody drives it, nothing blocks it, no drive is counted.

    A pending cancellation stays, unless ``resume`` continues the run: a
    decision about one call (an unknown commit resolved, a compensation's
    failure fixed) does not take the cancellation back, and the next drive
    goes on undoing the run.
    """
    return changed(
        old,
        state=state,
        owner=None,
        pid=None,
        host=None,
        cancel_reason=old.cancel_reason if resume is None else None,
        resume=resume,
        drives=0,
        blocked=None,
    )


def waiting_for_code(old: ControlRecord, waiting: str) -> ControlRecord:
    """``old`` left to code that can replay it (``RunControl.wait_for_code``)."""
    return changed(old, state="waiting", owner=None, pid=None, host=None, blocked=waiting)


ACTIVE = ("enqueued", "claimed", "blocked", "waiting")
"""States of a control record whose run has not finished (its dedup id is taken)."""


@dataclass(frozen=True)
class QueueLimits:
    """The limits of one queue that the store applies when a worker claims.

    Attributes:
        name: The queue's name.
        concurrency: Runs of the queue in flight across all workers (``None``: no bound).
        rate_limit: ``(n, seconds)``: at most ``n`` starts in any window of ``seconds``.
        partition_concurrency: Runs in flight per partition key.
    """

    name: str
    concurrency: int | None = None
    rate_limit: tuple[int, float] | None = None
    partition_concurrency: int | None = None


@dataclass(frozen=True)
class ControlRecord:
    """What the runtime knows about one run outside its log.

    Attributes:
        run_id: The run.
        workflow: The workflow's recorded name.
        input: The input as JSON text (what ``start_workflow`` was given).
        models: The model slots as JSON text.
        queue: The queue, or ``None`` for a run driven by the process that started it.
        partition_key: The partition the run counts against.
        priority: Lower goes first.
        dedup_id: Deduplication id (free again once the run finished).
        deadline: Seconds the run may take once it starts executing.
        state: ``enqueued``, ``claimed``, ``blocked``, ``waiting`` (for code that can replay it:
            no worker drives it and it holds no slot of its queue), ``done`` or ``cancelled``.
        owner: The driver that claimed it (a worker's name).
        pid: The driver's process id.
        host: The driver's host name.
        created_at: When it was submitted (Unix time).
        claimed_at: When it was last claimed (Unix time; rate limits count these).
        cancel_reason: A pending cancellation (``requested`` or ``deadline``).
        resume: ``cancelled`` or ``failed`` when ``resume_run`` asked to continue it.
        seq: Submission order (FIFO within a priority).
        traceparent: The W3C trace context of the code that started the run (tracing on),
            which the run's first drive continues wherever it is driven.
        drives: Drives begun since the run's last recorded outcome: a drive that a
            dying worker cut stays counted (recovery is bounded by it).
        driven_at: When the last drive began (Unix time; recoveries back off from it).
        blocked: Why a ``blocked`` run waits for a decision, as JSON text
            (``reason``, ``error_type``, ``error_message``, ``key``); for a ``waiting`` run,
            the code it waits for (``manifest_hash``, ``drift_keys``).
        budget: The budget ``start_workflow`` was given (``Budget.to_json()`` as JSON
            text), which the run's first drive records in its log.
        debounce_key: While the run is enqueued, a submit with the same queue and key
            replaces its input and moves its start instead of adding a run.
        start_at: No worker claims the run before this time (Unix time; ``None``: at once).
        debounce_until: The latest ``start_at`` a debounce may move it to (``debounce_max``).
    """

    run_id: str
    workflow: str
    input: str = "null"
    models: str = "{}"
    queue: str | None = None
    partition_key: str | None = None
    priority: int = 0
    dedup_id: str | None = None
    deadline: float | None = None
    state: str = "enqueued"
    owner: str | None = None
    pid: int | None = None
    host: str | None = None
    created_at: float = 0.0
    claimed_at: float | None = None
    cancel_reason: str | None = None
    resume: str | None = None
    seq: int = 0
    traceparent: str | None = None
    drives: int = 0
    driven_at: float | None = None
    blocked: str | None = None
    budget: str | None = None
    debounce_key: str | None = None
    start_at: float | None = None
    debounce_until: float | None = None


@dataclass(frozen=True)
class WorkerRecord:
    """A worker as it registered itself in its world's control store, while it serves.

    It is alive while it holds the lock ``worker:<name>`` (``worker_lock``): a
    record whose lock can be taken is a dead worker's.

    Attributes:
        name: The worker's name (``Worker(name=...)``, else ``host:pid:random``).
        pid: Its process id.
        host: Its host name.
        started_at: When it started serving (Unix time).
        code: JSON text: each workflow it serves, by recorded name, to the hash of its
            code's manifest (without the model slots), as a run's manifest gives it.
        queues: The queues it claims from.
    """

    name: str
    pid: int = 0
    host: str = ""
    started_at: float = 0.0
    code: str = "{}"
    queues: tuple[str, ...] = ()

    @property
    def workflows(self) -> tuple[str, ...]:
        """The recorded names of the workflows it serves."""
        return tuple(sorted(json.loads(self.code)))


def worker_lock(name: str) -> str:
    """The name of the lock a worker holds while it serves (a dead worker's comes free)."""
    return f"worker:{name}"


_FIELDS = tuple(f.name for f in dataclasses.fields(ControlRecord))
_new = object.__new__


def record_of(row: Sequence[Any]) -> ControlRecord:
    """A record from a store's row of every field in order (``ControlRecord(*row)``, cheaper).

    A frozen dataclass sets each of its 26 fields through ``object.__setattr__``;
    a store builds a record per row it reads, so this fills the instance's
    dictionary at once instead.
    """
    if len(row) != len(_FIELDS):
        return ControlRecord(*row)
    rec = _new(ControlRecord)
    rec.__dict__.update(zip(_FIELDS, row, strict=True))
    return rec


def changed(old: ControlRecord, **changes: Any) -> ControlRecord:
    """``dataclasses.replace(old, **changes)`` without re-running the initialiser (see ``record_of``).

    ``changes`` name fields of ``ControlRecord``; an unknown name raises ``TypeError``.
    """
    unknown = changes.keys() - old.__dict__.keys()
    if unknown:
        raise TypeError(f"ControlRecord has no field {sorted(unknown)[0]!r}")
    rec = _new(ControlRecord)
    fields = rec.__dict__
    fields.update(old.__dict__)
    fields.update(changes)
    return rec


def debounced(old: ControlRecord, new: ControlRecord) -> ControlRecord:
    """``old`` (an enqueued run with ``new``'s debounce key) with ``new``'s input and start, bounded."""
    start = new.start_at
    if start is not None and old.debounce_until is not None:
        start = min(start, old.debounce_until)
    return changed(old, input=new.input, start_at=start)


class RunControl(Protocol):
    """The protocol a world's control store implements (every method is one transaction)."""

    def submit(self, record: ControlRecord) -> ControlRecord:
        """Store a new record; with a dedup id already active in its queue, return that run's record.

        An existing record with the same run id is returned unchanged.
        """

    def get(self, run_id: str) -> ControlRecord | None:
        """The run's record, or ``None``."""

    def claim(
        self,
        limits: QueueLimits,
        *,
        owner: str,
        pid: int,
        host: str,
        room: int,
        now: float,
        workflows: Collection[str] | None = None,
    ) -> list[ControlRecord]:
        """Claim up to ``room`` enqueued runs of a queue, lowest priority first, FIFO within it.

        The queue's global concurrency counts every claimed run of the queue
        (orphaned ones too); the rate limit counts claims within the window;
        the partition bound counts claimed runs per partition key. With
        ``workflows``, only runs of those workflow names are claimed.
        """

    def adopt(
        self, run_id: str, workflow: str, *, owner: str, pid: int, host: str, now: float
    ) -> ControlRecord:
        """Mark the run as claimed by this driver (recovery, or a run without a queue)."""

    def finish(self, run_id: str, state: str) -> None:
        """End the record (``done`` or ``cancelled``); clears its requests and frees its dedup id."""

    def finish_many(self, ends: Sequence[tuple[str, str]]) -> None:
        """``finish`` for several runs (run id, state) in one transaction."""

    def delete(self, run_ids: Sequence[str]) -> None:
        """Remove the records of these runs (``gc`` of finished runs); an unknown id is skipped."""

    def block(self, run_id: str, blocked: str) -> None:
        """Mark a claimed run ``blocked`` (``blocked``: the JSON of why); it waits for a decision.

        A blocked run holds no slot of its queue and no worker drives or recovers it.
        """

    def wait_for_code(self, run_id: str, waiting: str) -> None:
        """Leave the run to code that can replay it: state ``waiting``, no owner, ``waiting`` its detail."""

    def uncount(self, run_id: str) -> None:
        """Take back the count of a drive that stopped on purpose (a worker that stops)."""

    def request_cancel(self, run_id: str, reason: str, now: float) -> ControlRecord:
        """Record a cancellation; an enqueued run becomes ``cancelled`` at once. Returns the record."""

    def cancel_requests(self, run_ids: Iterable[str]) -> dict[str, str]:
        """The pending cancellations of these runs: run id to reason."""

    def reopen(self, run_id: str, resume: str | None) -> ControlRecord | None:
        """Put a finished or blocked run back: on its queue (``enqueued``), or ``claimed`` by nobody.

        Its count of drives starts again from zero. A pending cancellation stays
        unless ``resume`` (``cancelled`` or ``failed``) continues the run.
        """

    def claimed(self) -> list[ControlRecord]:
        """Every claimed record (recovery looks for those whose driver died)."""

    def waiting_records(self) -> list[ControlRecord]:
        """Every record in state ``waiting`` (for code that can replay its run)."""

    def blocked_records(self) -> list[ControlRecord]:
        """Every blocked record."""

    def records(self, run_ids: Sequence[str]) -> dict[str, ControlRecord]:
        """The records of these runs that exist."""

    def unstarted(self) -> list[ControlRecord]:
        """Records of runs never claimed: enqueued, or cancelled while enqueued (FIFO)."""

    def register_worker(self, worker: WorkerRecord) -> None:
        """Record a worker that starts serving (replacing a record of the same name)."""

    def unregister_worker(self, name: str) -> None:
        """Remove a worker's record (it stopped, or it was found dead); an unknown name is skipped."""

    def workers(self) -> list[WorkerRecord]:
        """Every worker record, live or not (``worker_lock`` tells), by name."""

    def version(self) -> int:
        """A number that changes when another connection writes (cheap to poll)."""

    def subscribe(
        self, on_change: Callable[[], None], about: Collection[str] = ()
    ) -> Callable[[], None] | None:
        """Call ``on_change`` in the running event loop after a submit, finish, cancel or reopen.

        Writes by any process of the world count. A call is a hint to read
        again, never a payload; a missed one only delays the reader until
        its next poll. ``about`` narrows the calls to the announcements the
        caller reads again for: ``"run:<run_id>"`` (the run's outcome or
        state changed), ``"cancel:"`` (any cancellation request), ``"queue:"``
        (new work on any queue), ``"free:"`` (a slot of a queue freed by a run's
        end: what a worker claiming under a global limit waits for); an entry
        ending in ``:`` matches every announcement it starts. A store may
        call more often than asked, never less: SQLite's and the memory store
        tell the kinds apart (``KINDS``) but not the runs, so ``run:<id>``
        hears every run's change. Returns the function that stops the calls,
        or ``None`` when the store cannot announce changes (the caller polls).
        """

    def close(self) -> None:
        """Release the store's resources."""


def _room(limits: QueueLimits, room: int, inflight: int, claims: Iterable[float | None], now: float) -> int:
    """How many runs a claim may take now under the queue's global and rate limits."""
    if limits.concurrency is not None:
        room = min(room, limits.concurrency - inflight)
    if limits.rate_limit is not None:
        n, window = limits.rate_limit
        recent = sum(1 for c in claims if c is not None and c > now - window)
        room = min(room, n - recent)
    return max(room, 0)


def _partition_free(limits: QueueLimits, parts: dict[str | None, int], key: str | None) -> bool:
    pc = limits.partition_concurrency
    return pc is None or key is None or parts.get(key, 0) < pc
