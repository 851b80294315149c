"""The queries of a SQLite event log: a run's rows, its summary, the runs of the file.

``SqliteLog`` writes; this base class holds what it reads, over the same
connection and under the same lock.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ._fresh import FreshRuns
from ._protocol import Row, RunInfo, listing_where
from ._sqlite_errors import failure

_INFO_COLUMNS = "run_id, workflow, status, parent_run_id, created_at, updated_at, code"
_IN_BATCH = 400
"""Run ids per ``IN (...)`` list: well under SQLite's limit on the parameters of one statement."""


class SqliteReads:
    """The reading half of ``SqliteLog`` (it sets the connection, the lock and the path)."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _fresh: FreshRuns
    path: Path

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """All rows of a run above ``after_seq``, in seq order, in one query."""
        if self._fresh.read_as_empty(run_id):
            return []
        with self._lock:
            try:
                return self._db.execute(
                    "SELECT seq, type, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
                    (run_id, after_seq),
                ).fetchall()
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, run_id) from exc

    def rows_of_types(self, run_ids: Sequence[str], types: Sequence[str]) -> dict[str, list[Row]]:
        """The rows of these types of several runs, by run, in seq order: one query per 400 runs.

        What a summary over many runs needs (``little runs --usage``) without
        reading every row of every run, one run at a time.
        """
        out: dict[str, list[Row]] = {r: [] for r in run_ids}
        marks = ", ".join("?" for _ in types)
        ids = list(out)
        with self._lock:
            try:
                for i in range(0, len(ids), _IN_BATCH):
                    part = ids[i : i + _IN_BATCH]
                    sql = (
                        f"SELECT run_id, seq, type, data FROM events WHERE run_id IN "
                        f"({', '.join('?' for _ in part)}) AND type IN ({marks}) ORDER BY run_id, seq"
                    )
                    for run_id, seq, type_, data in self._db.execute(sql, [*part, *types]):
                        out[run_id].append((seq, type_, data))
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, None) from exc
        return out

    def child_runs(self, parent_ids: Sequence[str]) -> dict[str, list[str]]:
        """The runs each of these runs started, by parent (through the index on ``parent_run_id``)."""
        out: dict[str, list[str]] = {}
        ids = list(dict.fromkeys(parent_ids))
        with self._lock:
            try:
                for i in range(0, len(ids), _IN_BATCH):
                    part = ids[i : i + _IN_BATCH]
                    sql = (
                        "SELECT parent_run_id, run_id FROM runs WHERE parent_run_id IN "
                        f"({', '.join('?' for _ in part)}) AND workflow != '' ORDER BY run_id"
                    )
                    for parent, run_id in self._db.execute(sql, part):
                        out.setdefault(parent, []).append(run_id)
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, None) from exc
        return out

    def times(self, run_id: str, after_seq: int = 0) -> dict[int, float]:
        """When each row of a run above ``after_seq`` was written (Unix seconds), by seq.

        Rows written before the log kept times (schema version 1) are left out.
        """
        with self._lock:
            try:
                return dict(
                    self._db.execute(
                        "SELECT seq, written_at FROM events WHERE run_id = ? AND seq > ? "
                        "AND written_at IS NOT NULL",
                        (run_id, after_seq),
                    ).fetchall()
                )
            except sqlite3.Error as exc:
                raise failure(exc, self.path, run_id) from exc

    def iter_rows(self, run_id: str, after_seq: int = 0, chunk: int = 4096) -> Iterator[Row]:
        """The rows of ``read``, fetched ``chunk`` rows per query as they are consumed.

        A resume indexes a long run without holding all of its raw rows at
        once. The chunks are consistent with each other because only the
        run's lock holder writes the run. No lock or statement stays open
        between chunks, so an abandoned iterator holds nothing.
        """
        if self._fresh.read_as_empty(run_id):
            return
        while True:
            with self._lock:
                try:
                    rows = self._db.execute(
                        "SELECT seq, type, data FROM events WHERE run_id = ? AND seq > ? "
                        "ORDER BY seq LIMIT ?",
                        (run_id, after_seq, chunk),
                    ).fetchall()
                except (sqlite3.Error, UnicodeDecodeError) as exc:
                    raise failure(exc, self.path, run_id) from exc
            yield from rows
            if len(rows) < chunk:
                return
            after_seq = rows[-1][0]

    def last_row(self, run_id: str) -> Row | None:
        """The run's row with the highest seq (its outcome, once it has ended), or ``None``."""
        with self._lock:
            try:
                found = self._db.execute(
                    "SELECT seq, type, data FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1", (run_id,)
                ).fetchone()
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, run_id) from exc
        return None if found is None else (found[0], found[1], found[2])

    def info(self, run_id: str) -> RunInfo | None:
        """The run's summary, or ``None`` when the log has no such run."""
        with self._lock:
            try:
                row = self._db.execute(
                    f"SELECT {_INFO_COLUMNS} FROM runs WHERE run_id = ? AND workflow != ''", (run_id,)
                ).fetchone()
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, run_id) from exc
        return RunInfo(*row) if row else None

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first, optionally filtered by status and workflow, a page by offset or by key."""
        where, args = listing_where(status, workflow, "?")
        if before is not None:
            where += " AND (created_at < ? OR (created_at = ? AND run_id < ?))"
            args += [before[0], before[0], before[1]]
        sql = f"SELECT {_INFO_COLUMNS} FROM runs WHERE {where} ORDER BY created_at DESC, run_id DESC "
        sql += "LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        with self._lock:
            try:
                return [RunInfo(*r) for r in self._db.execute(sql, args)]
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, None) from exc

    def count(self, *, status: str | None = None, workflow: str | None = None) -> int:
        """How many runs ``runs`` lists with these filters (one ``count(*)`` on an index)."""
        where, args = listing_where(status, workflow, "?")
        sql = f"SELECT count(*) FROM runs WHERE {where}"
        if status is None and workflow is None:  # the table's count (no scan) less the runs only fenced
            sql = "SELECT (SELECT count(*) FROM runs) - (SELECT count(*) FROM runs WHERE workflow = '')"
        with self._lock:
            try:
                return int(self._db.execute(sql, args).fetchone()[0])
            except sqlite3.Error as exc:
                raise failure(exc, self.path, None) from exc

    def integrity_check(self) -> str:
        """SQLite's own ``PRAGMA integrity_check`` answer (``"ok"`` when sound)."""
        with self._lock:
            try:
                return "\n".join(str(r[0]) for r in self._db.execute("PRAGMA integrity_check"))
            except sqlite3.Error as exc:  # damaged past what the check itself can read
                return f"{exc}"
