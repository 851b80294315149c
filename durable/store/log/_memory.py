"""``MemoryLog``: the in-process log backend, for tests and ``memory_world()``."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ..._clock import wall
from ._protocol import Append, Row, RunInfo, _stale, _taken, append_one_by_one


class MemoryLog:
    """An in-process log for unit tests and ``memory_world()``.

    It follows the same rules as ``SqliteLog`` (fencing, explicit seqs,
    all-or-nothing appends) so that tests on it mean something.
    """

    stores_bytes = True
    """A row's payload may be bytes (an encrypted log's ciphertext), returned as it was stored."""

    def __init__(self) -> None:
        self._rows: dict[str, list[Row]] = {}
        self._times: dict[str, dict[int, float]] = {}
        self._info: dict[str, RunInfo] = {}
        self._tokens: dict[str, int] = {}
        self._meta: dict[str, str] = {}
        self._lock = threading.Lock()

    def get_meta(self, name: str) -> str | None:
        """A fact about the log as a whole (its key check), or ``None``."""
        return self._meta.get(name)

    def set_meta(self, name: str, value: str) -> None:
        """Record a fact about the log as a whole."""
        with self._lock:
            self._meta[name] = value

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        """Write every append of ``batch``, or none of them (see ``EventLog.append``)."""
        with self._lock:
            for a in batch:
                current = self._tokens.get(a.run_id, 0)
                if a.token != current:
                    raise _stale(a.run_id, a.token, current)
                have = self._rows.get(a.run_id, ())
                last = have[-1][0] if have else 0
                for i, row in enumerate(a.rows):
                    if row[0] != last + 1 + i:
                        raise _taken(a.run_id, row[0])
            now = wall()
            for a in batch:
                self._rows.setdefault(a.run_id, []).extend(a.rows)
                self._times.setdefault(a.run_id, {}).update((row[0], now) for row in a.rows)
                info = self._info.get(a.run_id)
                if a.created is not None and info is None:
                    workflow, parent = a.created
                    info = RunInfo(a.run_id, workflow, "running", parent, now, now, a.code)
                if info is not None and a.status is not None:
                    info = replace(info, status=a.status, updated_at=now)
                if info is not None:
                    self._info[a.run_id] = info

    def append_each(self, batch: Sequence[Append]) -> list[BaseException | None]:
        """Write each append of ``batch`` that is not fenced; per append ``None`` or its ``FencedError``."""
        return append_one_by_one(self, batch)

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """All rows of a run with a seq above ``after_seq``, in seq order."""
        with self._lock:
            return [r for r in self._rows.get(run_id, ()) if r[0] > after_seq]

    def last_row(self, run_id: str) -> Row | None:
        """The run's row with the highest seq, or ``None``."""
        with self._lock:
            rows = self._rows.get(run_id)
            return rows[-1] if rows else None

    def times(self, run_id: str, after_seq: int = 0) -> dict[int, float]:
        """When each row of a run above ``after_seq`` was written (Unix seconds), by seq."""
        with self._lock:
            return {seq: at for seq, at in self._times.get(run_id, {}).items() if seq > after_seq}

    def iter_rows(self, run_id: str, after_seq: int = 0) -> Iterator[Row]:
        """The rows ``read`` returns, one at a time."""
        yield from self.read(run_id, after_seq)

    def info(self, run_id: str) -> RunInfo | None:
        """The run's summary, or ``None`` when no append started the run."""
        return self._info.get(run_id)

    def rows_of_types(self, run_ids: Sequence[str], types: Sequence[str]) -> dict[str, list[Row]]:
        """The rows of these types of several runs (see ``SqliteLog.rows_of_types``)."""
        wanted = set(types)
        with self._lock:
            return {r: [row for row in self._rows.get(r, ()) if row[1] in wanted] for r in run_ids}

    def child_runs(self, parent_ids: Sequence[str]) -> dict[str, list[str]]:
        """The runs started by each of these runs (see ``SqliteLog.child_runs``)."""
        parents = set(parent_ids)
        out: dict[str, list[str]] = {}
        with self._lock:
            for info in self._info.values():
                if info.parent_run_id in parents and info.workflow:
                    out.setdefault(info.parent_run_id, []).append(info.run_id)
        return {p: sorted(c) for p, c in out.items()}

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first, optionally filtered (see ``EventLog.runs``)."""
        found = self._matching(status, workflow)
        if before is not None:
            found = [i for i in found if (i.created_at, i.run_id) < before]
        found.sort(key=lambda i: (i.created_at, i.run_id), reverse=True)
        end = None if limit is None else offset + limit
        return found[offset:end]

    def count(self, *, status: str | None = None, workflow: str | None = None) -> int:
        """How many runs ``runs`` lists with these filters."""
        return len(self._matching(status, workflow))

    def _matching(self, status: str | None, workflow: str | None) -> list[RunInfo]:
        with self._lock:
            return [
                i
                for i in self._info.values()
                if (status is None or i.status == status) and (workflow is None or i.workflow == workflow)
            ]

    def fence(self, run_id: str) -> int:
        """Take a new fencing token for a run; every older token becomes stale."""
        with self._lock:
            token = self._tokens.get(run_id, 0) + 1
            self._tokens[run_id] = token
            return token

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Append ``snapshot`` and drop every row of the run before it."""
        with self._lock:
            current = self._tokens.get(run_id, 0)
            if token != current:
                raise _stale(run_id, token, current)
            rows = self._rows.get(run_id, [])
            last = rows[-1][0] if rows else 0
            if snapshot[0] != last + 1:
                raise _taken(run_id, snapshot[0])
            self._rows[run_id] = [snapshot]
            self._times[run_id] = {snapshot[0]: wall()}

    def delete_run(self, run_id: str) -> None:
        """Remove a run: its rows, its summary and its fencing token."""
        with self._lock:
            self._rows.pop(run_id, None)
            self._times.pop(run_id, None)
            self._info.pop(run_id, None)
            self._tokens.pop(run_id, None)

    def integrity_check(self) -> str:
        """Whether every run's rows still carry consecutive seqs (``"ok"``), or the first gap."""
        with self._lock:
            for run_id, rows in self._rows.items():
                for before, after in itertools.pairwise(rows):
                    if after[0] != before[0] + 1:
                        return f"run {run_id!r}: seq {after[0]} follows seq {before[0]}"
        return "ok"

    def vacuum(self) -> None:
        """Nothing to give back: deleted rows are freed at once."""

    def close(self) -> None:
        """Nothing to release."""
