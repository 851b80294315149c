"""The log protocol every backend implements.

A log stores rows ``(seq, type, data)`` per run, where ``data`` is the JSON
payload of the event. Appends are all-or-nothing, carry the writer's fencing
token, and name their seqs explicitly, so that a second writer of the same
seq fails instead of forking the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ..errors import FencedError

Row = tuple[int, str, str]
"""One stored event: ``(seq, type, json data)``."""

TERMINAL = frozenset({"completed", "failed"})


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
    """

    run_id: str
    workflow: str
    status: str
    parent_run_id: str | None
    created_at: float
    updated_at: float


class Append(NamedTuple):
    """One run's rows in a (possibly grouped) append (a named tuple: cheap to build).

    Attributes:
        run_id: The run written to.
        rows: The rows, with consecutive seqs following the log's last one.
        token: The writer's fencing token.
        status: A new status for the run, when these rows change it.
        created: ``(workflow, parent_run_id)`` when these rows start the run.
    """

    run_id: str
    rows: Sequence[Row]
    token: int
    status: str | None = None
    created: tuple[str, str | None] | None = None


class EventLog(Protocol):
    """The small protocol a log backend implements."""

    def append(self, batch: Sequence[Append]) -> None:
        """Write every append of ``batch`` in one transaction, or none of them.

        Raises:
            FencedError: A token is stale or a seq is taken by another writer.
        """

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """All rows of a run with a seq above ``after_seq``, in seq order, in one query."""

    def info(self, run_id: str) -> RunInfo | None:
        """The run's summary, or ``None`` when the log has no such run."""

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[RunInfo]:
        """Runs, newest first, optionally filtered."""

    def fence(self, run_id: str) -> int:
        """Take a new fencing token for a run; every older token becomes stale."""

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Append ``snapshot`` and delete every row of the run strictly before it."""

    def delete_run(self, run_id: str) -> None:
        """Remove a run and its rows."""

    def close(self) -> None:
        """Release the backend's resources."""


def _stale(run_id: str, token: int, current: int) -> FencedError:
    return FencedError(
        f"run {run_id!r}: this driver's fencing token {token} is stale (current {current}); "
        "another caller took over the run. Stop this driver; the other one continues.",
        run_id=run_id,
    )


def _taken(run_id: str, seq: int) -> FencedError:
    return FencedError(
        f"run {run_id!r}: seq {seq} was already written by another writer; "
        "this driver lost the run and must stop.",
        run_id=run_id,
    )
