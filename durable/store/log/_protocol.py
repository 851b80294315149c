"""The log protocol every backend implements.

A log stores rows ``(seq, type, data)`` per run, where ``data`` is the JSON
payload of the event. Appends are all-or-nothing, carry the writer's fencing
token, and name their seqs explicitly, so that a second writer of the same
seq fails instead of forking the log.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ...errors import FencedError

Row = tuple[int, str, str]
"""One stored event: ``(seq, type, json data)``."""

TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""The statuses of a finished run: nothing drives it (``resume_run`` may reopen a failed or cancelled one)."""


@dataclass(frozen=True)
class RunInfo:
    """What the log knows about a run without reading its events.

    Attributes:
        run_id: The run's id.
        workflow: The workflow's name.
        status: ``running``, ``completed``, ``failed`` or ``interrupted``.
        parent_run_id: The parent run when this is a child run.
        created_at: Unix time the run started.
        updated_at: Unix time of its last status change.
        code: The manifest hash its ``run.started`` recorded (its code version), kept
            with the summary so that a listing reads no log; ``None`` for a run written
            before the summary kept it, or by a writer that did not give it.
    """

    run_id: str
    workflow: str
    status: str
    parent_run_id: str | None
    created_at: float
    updated_at: float
    code: str | None = None


class Append(NamedTuple):
    """One run's rows in a (possibly grouped) append (a named tuple: cheap to build).

    Attributes:
        run_id: The run written to.
        rows: The rows, with consecutive seqs following the log's last one.
        token: The writer's fencing token.
        status: A new status for the run, when these rows change it.
        created: ``(workflow, parent_run_id)`` when these rows start the run.
        code: The run's manifest hash, kept in its summary when these rows start it.
    """

    run_id: str
    rows: Sequence[Row]
    token: int
    status: str | None = None
    created: tuple[str, str | None] | None = None
    code: str | None = None


class EventLog(Protocol):
    """The protocol a log backend implements: everything durable asks of its event log.

    A log keeps, per run, rows ``(seq, type, data)`` and a summary
    (``RunInfo``). The engine is the only writer of a run while it holds the
    run's lock; the log's job is to make a second writer fail instead of
    forking the history: every write carries the writer's fencing token
    (checked in the write's own transaction) and names its seqs explicitly.

    ``MemoryLog`` and ``SqliteLog`` implement it; ``durable.store.conformance``
    checks another backend against the same rules.

    A log may also keep when each row was written: a method
    ``times(run_id, after_seq=0) -> dict[int, float]`` (Unix seconds by seq,
    the time of the append's commit) fills the ``at`` of the events that
    ``world.events`` returns. Every built-in log has it; a log without it
    gives events whose ``at`` is ``None`` (see ``row_times``).

    A log may also commit several runs' appends together while leaving out
    a fenced one: ``append_each(batch) -> list[BaseException | None]``
    writes, in one transaction, every append of ``batch`` (one per run) that
    is not fenced and returns per append ``None`` or its ``FencedError``
    (any other failure writes nothing and raises). The engine groups the commits of
    runs driven at once through it; a log without it commits each run alone.
    """

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        """Write every append of ``batch`` in one transaction, or none of them.

        Each append's rows carry consecutive seqs following the run's last
        stored seq (the writer's duty; a backend may refuse a gap). An append
        with ``created`` starts the run's summary (status ``running``); one
        with ``status`` changes it.

        Args:
            batch: The appends, possibly for several runs (a parent and its
                child run commit together).
            sync: ``False`` allows a commit that survives a process crash but
                may be lost to a power loss until the next synced append (a
                plain tool's receipt: losing it to a power loss fails closed).
                A backend whose every commit survives both ignores it.

        Raises:
            FencedError: An append's token is not the run's current one (a
                newer writer fenced it), or one of its seqs is already stored.
                Nothing of the batch is written then.
        """

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """All rows of a run with a seq above ``after_seq``, in seq order, in one query.

        Args:
            run_id: The run.
            after_seq: Only rows with a greater seq are returned.

        Returns:
            The rows; an empty list for an unknown run.
        """

    def iter_rows(self, run_id: str, after_seq: int = 0) -> Iterator[Row]:
        """The rows ``read`` returns, yielded as they are consumed.

        A resume indexes a long run through it without holding every raw row
        at once. An abandoned iterator must hold no lock or transaction.

        Args:
            run_id: The run.
            after_seq: Only rows with a greater seq are yielded.

        Yields:
            The rows in seq order; none for an unknown run.
        """

    def info(self, run_id: str) -> RunInfo | None:
        """The run's summary.

        Args:
            run_id: The run.

        Returns:
            Its ``RunInfo``, or ``None`` when no append started the run (a
            run that was only fenced has no summary).
        """

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first (ties broken by run id, descending), optionally filtered.

        Args:
            status: Only runs with this status.
            workflow: Only runs of this workflow.
            limit: At most this many runs (``None``: all).
            offset: Skip this many runs first (pagination).
            before: Only runs older than this ``(created_at, run_id)``, in the
                listing's order: the last run of the previous page (a page
                read by key, as fast far back as at the top).

        Returns:
            The summaries of the matching runs.
        """

    def count(self, *, status: str | None = None, workflow: str | None = None) -> int:
        """How many runs ``runs`` lists with these filters and no limit.

        Args:
            status: Only runs with this status.
            workflow: Only runs of this workflow.

        Returns:
            The number of matching runs.
        """

    def fence(self, run_id: str) -> int:
        """Take a new fencing token for a run; every older token becomes stale.

        Args:
            run_id: The run (it need not exist yet).

        Returns:
            A token greater than every token handed out for the run before.
        """

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Append ``snapshot`` and delete every row of the run strictly before it, in one transaction.

        Args:
            run_id: The run.
            snapshot: The snapshot row; its seq follows the run's last one.
            token: The compacting writer's fencing token.

        Raises:
            FencedError: The token is stale or the snapshot's seq is taken;
                nothing changes then.
        """

    def delete_run(self, run_id: str) -> None:
        """Remove a run: its rows, its summary and its fencing token.

        Args:
            run_id: The run; an unknown run is no error.
        """

    def integrity_check(self) -> str:
        """Check the storage itself (for SQLite, ``PRAGMA integrity_check``).

        Returns:
            ``"ok"`` when the storage is sound, otherwise what is wrong, in words.
        """

    def vacuum(self) -> None:
        """Give the space of deleted and compacted rows back to the disk.

        A log without a file has nothing to give back and does nothing.
        """

    def close(self) -> None:
        """Release the backend's resources; the log is unusable afterwards."""


def row_times(log: Any, run_id: str, after_seq: int = 0) -> dict[int, float]:
    """When each row of a run was written, by seq; empty for a log that keeps no times."""
    times = getattr(log, "times", None)
    return {} if times is None else times(run_id, after_seq)


class _Appends(Protocol):
    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None: ...


def append_one_by_one(log: _Appends, batch: Sequence[Append]) -> list[BaseException | None]:
    """``append_each`` for a log without it: each append in its own transaction.

    Returns, per append, ``None`` for written or the ``FencedError`` that kept it out.
    """
    out: list[BaseException | None] = []
    for a in batch:
        try:
            log.append([a])
        except FencedError as exc:
            out.append(exc)
        else:
            out.append(None)
    return out


def _stale(run_id: str, token: int, current: int) -> FencedError:
    return FencedError(
        f"run {run_id!r}: this driver's fencing token {token} is stale (current {current}); "
        "another caller took over the run. Stop this driver; the other one continues.",
        run_id=run_id,
    )


def refused(a: Append, current: int) -> FencedError:
    """Why a guarded append wrote nothing: a stale token, or a new run that another writer started."""
    if current != a.token or a.created is None:
        return _stale(a.run_id, a.token, current)
    return FencedError(
        f"run {a.run_id!r}: another writer started the run after this driver read its log; "
        "this driver must stop (a resume reads what really is in the log).",
        run_id=a.run_id,
    )


def _taken(run_id: str, seq: int) -> FencedError:
    return FencedError(
        f"run {run_id!r}: seq {seq} was already written by another writer; "
        "this driver lost the run and must stop.",
        run_id=run_id,
    )


def listing_where(status: str | None, workflow: str | None, mark: str) -> tuple[str, list[object]]:
    """The ``WHERE`` of a SQL log's listing (started runs of this status and workflow) and its arguments.

    ``mark`` is the driver's placeholder (``?`` or ``%s``).
    """
    where, args = "workflow != ''", list[object]()
    if status is not None:
        where += f" AND status = {mark}"
        args.append(status)
    if workflow is not None:
        where += f" AND workflow = {mark}"
        args.append(workflow)
    return where, args
