"""``SqliteLog``: the event log in one SQLite file, in WAL mode.

Rows live in a ``WITHOUT ROWID`` table keyed by ``(run_id, seq)``, so a second
writer of the same seq fails instead of forking the log. Every append is one
``BEGIN IMMEDIATE`` transaction that also checks the writer's fencing token.
The schema version is kept in ``PRAGMA user_version``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ..._clock import wall
from ...errors import ConfigurationError, FencedError
from ...security import refuse_linked_database
from ._fresh import FreshRuns
from ._protocol import Append, Row, _stale, _taken
from ._sqlite_errors import failure
from ._sqlite_reads import SqliteReads
from ._sqlite_schema import INSERT_EVENT, open_log
from ._wal_checkpoints import Checkpointer

DURABILITY_SYNC = {"process": "NORMAL", "power": "FULL"}

T = TypeVar("T")

_ONE_STATEMENT_ROWS = 64
"""Appends up to this many rows are one statement; larger ones use a transaction."""


_KNOWN = (
    "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = ?1) OR EXISTS (SELECT 1 FROM events WHERE run_id = ?1)"
)
"""Whether the log has a run's row or any of its events (one statement for ``fence``)."""


def _guarded_insert(n: int) -> str:
    """One ``INSERT`` of ``n`` rows that writes nothing unless the writer's token is current.

    Parameters: ``?1`` run id, ``?2`` token, ``?3`` the time written, then
    ``(seq, type, data)`` per row. A single statement is its own transaction,
    so the token check, the rows and the commit cost one call instead of four
    (``BEGIN``, ``SELECT``, ``INSERT``, ``COMMIT``).
    """
    values = ",".join(f"(?{3 * i + 4},?{3 * i + 5},?{3 * i + 6})" for i in range(n))
    return (
        "INSERT INTO events (run_id, seq, type, data, written_at) "
        "SELECT ?1, column1, column2, column3, ?3 "
        f"FROM (VALUES {values}) "
        "WHERE COALESCE((SELECT token FROM runs WHERE run_id = ?1), 0) = ?2"
    )


class SqliteLog(SqliteReads):
    """The durable log in a SQLite file.

    Args:
        path: The database file (created when missing).
        durability: ``"process"`` (``synchronous=NORMAL``: survives any process
            kill) or ``"power"`` (``synchronous=FULL``: every commit is fsynced).
        busy_timeout: Milliseconds a writer waits for another one's transaction.

    Raises:
        LogCorruptedError: The file exists but is not a durable log.
        LogFormatError: The file was written by a newer, incompatible SDK.
        LogUnavailableError: The disk is full, or another process kept the file locked.
    """

    stores_bytes = True
    """A row's payload may be bytes (an encrypted log's ciphertext), returned as it was stored."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "process",
        busy_timeout: int = 10_000,
    ):
        if durability not in DURABILITY_SYNC:
            raise ConfigurationError(f"durability must be 'process' or 'power', not {durability!r}")
        self.path = Path(path)
        refuse_linked_database(self.path.parent, (), self.path.name)
        self.durability = durability
        self._lock = threading.RLock()  # re-entered by an unsynced append
        self._inserts: dict[int, str] = {}
        # Runs fenced while they had no row at all: their token, taken for real by their
        # first append (see ``fence``).
        self._unfenced: dict[str, int] = {}
        # Of those, the ones whose next read (right after the fence) needs no query.
        self._fresh = FreshRuns()
        # "process" commits cost no fsync, so a checkpoint's two would stand out: they run
        # in the background. With "power" every commit waits on the disk already, and a
        # background checkpoint would compete with it for the disk: SQLite runs them inline.
        self.checkpointer = Checkpointer(self.path) if durability == "process" else None
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the event log {str(self.path)!r}: {exc}") from exc
        try:
            open_log(
                self._db, self.path, DURABILITY_SYNC[durability], busy_timeout, self.checkpointer is not None
            )
        except BaseException:
            self._db.close()
            raise

    # -- writing -------------------------------------------------------------

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        """Write every append of ``batch`` in one transaction, or none of them.

        With ``"power"`` durability and ``sync=False`` the commit is not
        fsynced (``synchronous=NORMAL`` for it alone): it survives a process
        crash, and the next synced commit makes it durable on disk with its own.
        """
        self._fresh.written(a.run_id for a in batch)
        if not sync and self.durability == "power":
            with self._lock:
                self._db.execute("PRAGMA synchronous=NORMAL")
                try:
                    self.append(batch)
                finally:
                    self._db.execute(f"PRAGMA synchronous={DURABILITY_SYNC['power']}")
            return
        if len(batch) == 1:
            a = batch[0]
            if (
                a.created is None
                and a.status is None
                and 0 < len(a.rows) <= _ONE_STATEMENT_ROWS
                and (not self._unfenced or a.run_id not in self._unfenced)
            ):
                self._append_rows(a)
                return
        self._transaction(batch, lambda now, firsts: self._write_each(batch, now, firsts))
        if self.checkpointer is not None:
            self.checkpointer.appended()

    def append_each(self, batch: Sequence[Append]) -> list[BaseException | None]:
        """Write the appends of ``batch`` in one transaction, each of them or none of it.

        Unlike ``append``, an append that is fenced (a stale token, a taken
        seq) is left out alone: the others commit. The list says, per
        append, ``None`` for written or the ``FencedError`` that kept it out.
        Any other failure writes nothing and raises.
        """
        self._fresh.written(a.run_id for a in batch)
        out = self._transaction(batch, lambda now, firsts: [self._write_alone(a, now, firsts) for a in batch])
        if self.checkpointer is not None:
            for _ in batch:
                self.checkpointer.appended()
        return out

    def _transaction(self, batch: Sequence[Append], body: Callable[[float, list[str]], T]) -> T:
        """``body(now, firsts)`` in one ``BEGIN IMMEDIATE`` transaction.

        ``firsts`` collects the runs whose first append takes the token
        ``fence`` gave; once committed they are fenced for real.
        """
        db = self._db
        with self._lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                firsts: list[str] = []
                out = body(wall(), firsts)
                db.execute("COMMIT")
                for run_id in firsts:
                    del self._unfenced[run_id]
                return out
            except BaseException as exc:
                if db.in_transaction:  # SQLite ends some failed transactions itself
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, self.path, batch[0].run_id, batch[0].rows) from exc
                raise

    def _write_each(self, batch: Sequence[Append], now: float, firsts: list[str]) -> None:
        for a in batch:
            self._write(a, now, firsts)

    def _write_alone(self, a: Append, now: float, firsts: list[str]) -> BaseException | None:
        """``_write`` inside a group: a fenced append is undone alone; returns its error or ``None``.

        A new run's create with its first row, and rows behind the token's
        guard, need no savepoint: their first statement writes nothing when
        it fails, and nothing after it can fail.
        """
        first = self._unfenced.get(a.run_id) == a.token
        safe = (first and a.created is not None and len(a.rows) == 1) or (
            not first and a.created is None and 0 < len(a.rows) <= _ONE_STATEMENT_ROWS
        )
        if not safe:
            self._db.execute("SAVEPOINT one")
        mark = len(firsts)
        error: BaseException | None = None
        try:
            self._write(a, now, firsts)
        except FencedError as exc:
            if not safe:
                self._db.execute("ROLLBACK TO one")
            del firsts[mark:]
            error = exc
        if not safe:
            self._db.execute("RELEASE one")
        return error

    def _write(self, a: Append, now: float, firsts: list[str]) -> None:
        """In an append's transaction: write ``a`` (its run's first append takes the fence's token)."""
        db = self._db
        if self._unfenced.get(a.run_id) == a.token:
            firsts.append(a.run_id)
            if a.created is not None:  # the common first append: one statement
                self._create(a, now)
                self._insert_rows(a, now)
                return
            self._take_token(a.run_id, a.token)
        if a.created is not None:
            db.execute(
                "INSERT INTO runs (run_id, workflow, status, parent_run_id, "
                "created_at, updated_at, token, code) VALUES (?, ?, 'running', ?, ?, ?, 0, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET workflow = excluded.workflow, "
                "parent_run_id = excluded.parent_run_id, "
                "created_at = excluded.created_at, updated_at = excluded.updated_at, code = excluded.code",
                (a.run_id, a.created[0], a.created[1], now, now, a.code),
            )
        if a.created is None and 0 < len(a.rows) <= _ONE_STATEMENT_ROWS:
            self._guarded_rows(a, now)  # the token check and the rows: one statement
        else:
            row = db.execute("SELECT token FROM runs WHERE run_id = ?", (a.run_id,)).fetchone()
            current = row[0] if row else 0
            if current != a.token:
                raise _stale(a.run_id, a.token, current)
            self._insert_rows(a, now)
        if a.status is not None:
            db.execute(
                "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?",
                (a.status, now, a.run_id),
            )

    def _insert_rows(self, a: Append, now: float) -> None:
        """In an append's transaction: insert the rows of ``a`` (a taken seq fails as fenced)."""
        try:
            self._db.executemany(INSERT_EVENT, [(a.run_id, s, t, d, now) for s, t, d in a.rows])
        except sqlite3.IntegrityError:
            raise _taken(a.run_id, a.rows[0][0]) from None

    def _create(self, a: Append, now: float) -> None:
        """In the first append's transaction: create the run's row with its summary and ``fence``'s token.

        One statement does what ``_take_token``, the summary's upsert and the
        token check do for other appends: it writes nothing when the run has a
        row (another writer fenced or created it since) or events.

        Raises:
            FencedError: Another writer created the run or wrote events since the fence.
        """
        assert a.created is not None
        db = self._db
        try:
            made = db.execute(
                "INSERT INTO runs (run_id, workflow, status, parent_run_id, created_at, updated_at, "
                "token, code) SELECT ?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7 "
                "WHERE NOT EXISTS (SELECT 1 FROM events WHERE run_id = ?1)",
                (a.run_id, a.created[0], a.status or "running", a.created[1], now, a.token, a.code),
            ).rowcount
        except sqlite3.IntegrityError:
            made = 0
        if made != 1:
            row = db.execute("SELECT token FROM runs WHERE run_id = ?", (a.run_id,)).fetchone()
            raise _stale(a.run_id, a.token, row[0] if row else 0)

    def _append_rows(self, a: Append) -> None:
        """The common append (rows only) as one autocommitted, token-guarded statement."""
        with self._lock:
            try:
                self._guarded_rows(a, wall())
            except sqlite3.Error as exc:
                raise failure(exc, self.path, a.run_id, a.rows) from exc
        if self.checkpointer is not None:
            self.checkpointer.appended()

    def _guarded_rows(self, a: Append, now: float) -> None:
        """Insert the rows of ``a`` in one statement that writes nothing unless its token is current.

        Raises:
            FencedError: The token is stale, or a seq is taken.
        """
        n = len(a.rows)
        sql = self._inserts.get(n)
        if sql is None:
            sql = self._inserts[n] = _guarded_insert(n)
        params: list[object] = [a.run_id, a.token, now]
        for row in a.rows:
            params += row
        try:
            written = self._db.execute(sql, params).rowcount
        except sqlite3.IntegrityError:
            raise _taken(a.run_id, a.rows[0][0]) from None
        if written != n:  # the guard matched nothing: another driver holds the run
            row = self._db.execute("SELECT token FROM runs WHERE run_id = ?", (a.run_id,)).fetchone()
            raise _stale(a.run_id, a.token, row[0] if row else 0)

    def fence(self, run_id: str) -> int:
        """Take a new fencing token for a run; every older token becomes stale.

        A run the log has never seen (no row in ``runs``, no event) costs no
        write here: its token is 1, and its first append takes it for real in
        its own transaction, which creates the run's row and fails as stale if
        any other writer fenced or wrote the run in between. So a new run's
        fence and its ``run.started`` are one commit, with the guarantee of a
        fence before the read: only the holder of the newest token writes, and
        it writes on the log it read. The read right after such a fence is
        answered as empty without a query (``FreshRuns``).
        """
        with self._lock:
            db = self._db
            try:
                base = self._unfenced.pop(run_id, 0)
                self._fresh.drop(run_id)
                if base == 0 and not db.execute(_KNOWN, (run_id,)).fetchone()[0]:
                    self._unfenced[run_id] = 1
                    self._fresh.mark(run_id)  # no event: the read that follows costs no query
                    return 1
                db.execute("BEGIN IMMEDIATE")
                db.execute(
                    # A run fenced before without a row: its row starts at that token, so the
                    # token given out then is stale now.
                    "INSERT INTO runs (run_id, token) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING",
                    (run_id, base),
                )
                token = db.execute(
                    "UPDATE runs SET token = token + 1 WHERE run_id = ? RETURNING token", (run_id,)
                ).fetchone()[0]
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:  # SQLite ends some failed transactions itself
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, self.path, run_id) from exc
                raise
            return int(token)

    def _take_token(self, run_id: str, token: int) -> None:
        """In the first append's transaction: create the run's row with the token ``fence`` gave.

        Raises:
            FencedError: Another writer created the row or wrote events since the fence.
        """
        db = self._db
        if db.execute("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", (run_id,)).fetchone() is not None:
            raise _stale(run_id, token, 0)
        try:
            db.execute("INSERT INTO runs (run_id, token) VALUES (?, ?)", (run_id, token))
        except sqlite3.IntegrityError:
            row = db.execute("SELECT token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            raise _stale(run_id, token, row[0] if row else 0) from None

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Append ``snapshot`` and delete every row of the run strictly before it."""
        db = self._db
        with self._lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                row = db.execute("SELECT token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                current = row[0] if row else 0
                if current != token:
                    raise _stale(run_id, token, current)
                try:
                    db.execute(
                        INSERT_EVENT,
                        (run_id, *snapshot, wall()),
                    )
                except sqlite3.IntegrityError:
                    raise _taken(run_id, snapshot[0]) from None
                db.execute("DELETE FROM events WHERE run_id = ? AND seq < ?", (run_id, snapshot[0]))
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:  # SQLite ends some failed transactions itself
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, self.path, run_id) from exc
                raise

    def delete_run(self, run_id: str) -> None:
        """Remove a run and its rows."""

        def delete(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

        self._immediate(delete, run_id)

    def delete_runs(self, run_ids: Sequence[str]) -> list[str]:
        """Remove many finished runs in one transaction: rows, summaries, messages and outbox entries.

        A run that is not finished is kept. ``gc`` calls it a batch at a time,
        holding each run's lock.

        Returns:
            The runs deleted.
        """

        def delete(db: sqlite3.Connection) -> list[str]:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS doomed (run_id TEXT PRIMARY KEY)")
            db.execute("DELETE FROM doomed")
            db.executemany(
                "INSERT OR IGNORE INTO doomed SELECT run_id FROM runs WHERE run_id = ? "
                "AND status IN ('completed', 'failed', 'cancelled')",
                [(r,) for r in run_ids],
            )
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table in ("events", "messages", "outbox", "runs"):
                if table in tables:
                    db.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM doomed)")
            return [r[0] for r in db.execute("SELECT run_id FROM doomed")]

        return self._immediate(delete, None)

    def _immediate(self, body: Callable[[sqlite3.Connection], T], run_id: str | None) -> T:
        """``body(db)`` in one ``BEGIN IMMEDIATE`` transaction, rolled back whole on any failure."""
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                out = body(db)
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:  # SQLite ends some failed transactions itself
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, self.path, run_id) from exc
                raise
        return out

    def get_meta(self, name: str) -> str | None:
        """A fact about the log as a whole (its key check), or ``None``; reading writes nothing."""
        with self._lock:
            try:
                row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            except sqlite3.OperationalError:  # no meta table: a log without such facts
                return None
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise failure(exc, self.path, None) from exc
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        """Record a fact about the log as a whole (the table is made on first use)."""
        db = self._db
        with self._lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise failure(exc, self.path, None) from exc
                raise

    def truncate_wal(self) -> None:
        """Check the write-ahead log back into the file and cut it to nothing (after a large ``gc``)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def vacuum(self) -> None:
        """Give the file space of deleted rows back to the file system."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")
            # In WAL mode VACUUM writes the rebuilt file through the WAL: check it back in.
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Stop the background checkpoints and close the connection."""
        if self.checkpointer is not None:
            self.checkpointer.close()
        with self._lock:
            self._db.close()
