"""``PostgresLog``: the event log in PostgreSQL, shared by every worker of a Postgres world.

Rows live in ``events`` keyed by ``(run_id, seq)``, so a second writer of the
same seq fails instead of forking the log; ``runs`` holds each run's summary
and its fencing token. Every append is one transaction that reads the
writer's token with ``FOR SHARE`` (or ``FOR UPDATE``) before it inserts: a
``fence`` by a new driver waits for an append in flight and every append
after it sees the new token, so a driver that lost its run writes nothing
more. The common append (rows only) is a single guarded ``INSERT``.

A connection lost mid-append is retried on a fresh one (``Database.run``); when the earlier attempt
may have committed, the retry finds its own rows and reports success instead of a conflict.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..._clock import wall
from ..postgres._schema import Database
from ._fresh import FreshRuns
from ._postgres_each import _MANY, append_each, end_state, ended
from ._postgres_reads import PostgresReads
from ._protocol import Append, Row, _stale, _taken, refused

if TYPE_CHECKING:
    from psycopg import Connection

    from ..messages._postgres import PostgresMessages
    from ..outbox._postgres import PostgresOutbox


_ROWS_ONLY = (
    "INSERT INTO {s}.events (run_id, seq, type, data) "
    "SELECT %(run)s, r.seq, r.type, r.data "
    "FROM unnest(%(seqs)b::bigint[], %(types)b::text[], %(datas)b::text[]) AS r(seq, type, data) "
    "WHERE COALESCE((SELECT token FROM {s}.runs WHERE run_id = %(run)s FOR SHARE), 0) = %(token)s"
)
"""One statement: the rows, written only when the writer's token is the run's current one."""


_ONE = (
    "WITH tok AS MATERIALIZED (SELECT COALESCE((SELECT token FROM {s}.runs WHERE run_id = %(run)s "
    "FOR UPDATE), 0) = %(token)s AND (%(workflow)s::text IS NULL "
    "OR NOT EXISTS (SELECT 1 FROM {s}.events WHERE run_id = %(run)s)) AS ok), "
    "ins AS (INSERT INTO {s}.events (run_id, seq, type, data) "
    "SELECT %(run)s, r.seq, r.type, r.data "
    "FROM unnest(%(seqs)b::bigint[], %(types)b::text[], %(datas)b::text[]) AS r(seq, type, data) "
    "WHERE (SELECT ok FROM tok) RETURNING 1), "
    "made AS (INSERT INTO {s}.runs (run_id, workflow, status, parent_run_id, created_at, updated_at, token, "
    "code) SELECT %(run)s, %(workflow)s, 'running', %(parent)s, %(now)s, %(now)s, 0, %(code)s "
    "WHERE %(workflow)s::text IS NOT NULL AND (SELECT ok FROM tok) "
    "ON CONFLICT (run_id) DO UPDATE SET workflow = excluded.workflow, "
    "parent_run_id = excluded.parent_run_id, created_at = excluded.created_at, "
    "updated_at = excluded.updated_at, code = excluded.code RETURNING 1), "
    "upd AS (UPDATE {s}.runs SET status = %(status)s, updated_at = %(now)s "
    "WHERE run_id = %(run)s AND %(status)s::text IS NOT NULL AND (SELECT ok FROM tok) RETURNING 1), "
    "ctl AS (UPDATE {s}.control SET state = %(state)s, cancel_reason = NULL, resume = NULL, drives = 0, "
    "blocked = NULL WHERE run_id = %(run)s AND state = 'claimed' AND %(state)s::text IS NOT NULL "
    "AND (SELECT ok FROM tok) RETURNING queue), "
    "gone AS (DELETE FROM {s}.leases WHERE name = %(what)s AND holder = %(holder)s "
    "AND %(state)s::text IS NOT NULL AND (SELECT ok FROM tok)) "
    "SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM made) + (SELECT count(*) FROM upd), "
    "(SELECT pg_notify(%(chan)s, %(what)s) WHERE %(status)s::text IS NOT NULL AND (SELECT ok FROM tok)), "
    "(SELECT count(*) FROM ctl), "
    "(SELECT pg_notify(%(chan)s, 'free:' || queue) FROM ctl WHERE queue IS NOT NULL)"
)
"""One statement: a run's rows with its creation or its new status, guarded by the writer's token.

An append that creates the run writes nothing either when the run has
events already (another writer started it since this one read its log).

The token row is locked ``FOR UPDATE`` (as a transaction of several
statements would lock it) and every part writes only when the token is the
run's current one; a taken seq fails the whole statement, so nothing of it
commits. A run's end is announced (``run:<run_id>``) at the commit. An
append that both creates its run and sets its status is not sent here (one
statement may change a row only once): ``append`` writes it in a
transaction of several statements.

A run's end (``state``: what its control record becomes, see ``end_state``)
also ends the run's control record while a driver holds it claimed, and
deletes the run's lease held by ``holder`` (this process), as
``PostgresControl.finish_many`` would in a statement of its own after it;
the queue whose slot it frees is announced (``free:<queue>``).
"""


def one_params(a: Append, now: float, channel: str, holder: str | None = None) -> dict[str, Any]:
    """The parameters of ``_ONE`` for one append (``holder``: of the run's lease, held here)."""
    return {
        "run": a.run_id,
        "token": a.token,
        "seqs": [r[0] for r in a.rows],
        "types": [r[1] for r in a.rows],
        "datas": [r[2] for r in a.rows],
        "workflow": None if a.created is None else a.created[0],
        "parent": None if a.created is None else a.created[1],
        "code": a.code,
        "status": a.status,
        "state": end_state(a.status),
        "holder": holder,
        "now": now,
        "chan": channel,
        "what": f"run:{a.run_id}",
    }


def _columns(rows: Sequence[Row]) -> tuple[list[int], list[str], list[str]]:
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


class PostgresLog(PostgresReads):
    """The durable log in a PostgreSQL schema (see ``durable.postgres_world``).

    Args:
        db: The pool and schema (``Database``); the schema must be migrated already.
        owns: Whether ``close`` closes the pool too (a log opened on its own); a
            world's log shares the pool with the world's other stores, and the
            world closes it.
    """

    def __init__(self, db: Database, *, owns: bool = False):
        self.db = db
        self._owns = owns
        sql = db.sql
        self._rows_only = sql(_ROWS_ONLY)
        self._guarded = sql(_ROWS_ONLY.replace("FOR SHARE", "FOR UPDATE"))
        self._one = sql(_ONE)
        self._many = sql(_MANY)
        self._token = sql("SELECT token FROM {s}.runs WHERE run_id = %s FOR UPDATE")
        # Runs whose claim, in the statement that took their token, saw no event: the next
        # read of each returns nothing without a query (then the mark is gone).
        self._fresh = FreshRuns()

    # -- writing -------------------------------------------------------------

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        """Write every append of ``batch`` in one transaction, or none of them.

        Every commit waits for the server's own durability (``synchronous_commit``
        as the server is configured); ``sync`` is accepted and ignored.
        """
        if not batch:
            return
        self._fresh.written(a.run_id for a in batch)
        first = batch[0]
        if len(batch) == 1 and first.created is None and first.status is None and first.rows:
            self.db.run(lambda conn, attempt: self._append_rows(conn, attempt, first), run_id=first.run_id)
            return
        if len(batch) == 1 and first.rows and (first.created is None or first.status is None):
            self.db.run(lambda conn, attempt: self._append_one(conn, attempt, first), run_id=first.run_id)
            return
        self.db.run(lambda conn, attempt: self._append_batch(conn, attempt, batch), run_id=first.run_id)

    def append_each(self, batch: Sequence[Append]) -> list[BaseException | None]:
        """Write every append of ``batch`` that is not fenced, in one transaction (see ``EventLog``)."""
        self._fresh.written(a.run_id for a in batch)
        return append_each(self, batch)

    def _append_rows(self, conn: Connection[Any], attempt: int, a: Append) -> None:
        import psycopg

        seqs, types, datas = _columns(a.rows)
        params = {"run": a.run_id, "seqs": seqs, "types": types, "datas": datas, "token": a.token}
        try:
            written = conn.execute(self._rows_only, params).rowcount
        except psycopg.errors.UniqueViolation:
            if attempt and self._already_written(conn, [a]):
                return  # the lost attempt committed these very rows
            raise _taken(a.run_id, a.rows[0][0]) from None
        if written != len(a.rows):  # the guard matched nothing: another driver holds the run
            got = conn.execute(
                self.db.sql("SELECT token FROM {s}.runs WHERE run_id = %s"), (a.run_id,)
            ).fetchone()
            raise _stale(a.run_id, a.token, int(got[0]) if got else 0)

    def _append_one(self, conn: Connection[Any], attempt: int, a: Append) -> None:
        """A run's rows with its creation or its end, in one autocommitted statement (``_ONE``)."""
        import psycopg

        if attempt and self._already_written(conn, [a]):
            return  # the lost attempt committed these very rows, and the summary with them
        state = end_state(a.status)
        lease = f"run:{a.run_id}"
        leases = {} if state is None else self.db.handover.holders([lease])
        params = one_params(a, wall(), self.db.channel, leases.get(lease))
        try:
            row = conn.execute(self._one, params).fetchone()
        except psycopg.errors.UniqueViolation:
            raise _taken(a.run_id, a.rows[0][0]) from None
        if row is None or int(row[0]) != len(a.rows):  # the guard matched nothing: another driver
            got = conn.execute(self._token, (a.run_id,)).fetchone()
            raise refused(a, int(got[0]) if got else 0)
        if state is not None:
            ended(self.db, [(a.run_id, state, bool(row[3]))], leases)

    def _append_batch(self, conn: Connection[Any], attempt: int, batch: Sequence[Append]) -> None:
        if attempt and self._already_written(conn, batch):
            return
        now = wall()
        finished: list[str] = []
        with conn.transaction():
            for a in batch:
                if a.created is not None:
                    conn.execute(
                        self.db.sql(
                            "INSERT INTO {s}.runs (run_id, workflow, status, parent_run_id, created_at, "
                            "updated_at, token, code) VALUES (%s, %s, 'running', %s, %s, %s, 0, %s) "
                            "ON CONFLICT (run_id) DO UPDATE SET workflow = excluded.workflow, "
                            "parent_run_id = excluded.parent_run_id, created_at = excluded.created_at, "
                            "updated_at = excluded.updated_at, code = excluded.code"
                        ),
                        (a.run_id, a.created[0], a.created[1], now, now, a.code),
                    )
                self.write_guarded(conn, a)
                if a.status is not None:
                    conn.execute(
                        self.db.sql("UPDATE {s}.runs SET status = %s, updated_at = %s WHERE run_id = %s"),
                        (a.status, now, a.run_id),
                    )
                    finished.append(a.run_id)
            for run_id in finished:  # delivered at commit, to result() and waiting workers
                conn.execute("SELECT pg_notify(%s, %s)", (self.db.channel, f"run:{run_id}"))

    def write_guarded(self, conn: Connection[Any], a: Append) -> None:
        """Inside the caller's transaction: check ``a.token`` (locking the run's token) and insert ``a.rows``.

        The check and the insert are one statement (the token row locked
        ``FOR UPDATE`` by the insert's guard), so an append costs one round
        trip inside its transaction. The message store and the outbox call
        this in their own transactions, so what they write beside the log
        commits with the rows or not at all.

        Raises:
            FencedError: The token is stale or a seq is taken (the caller's
                transaction is then unusable and rolls back: every caller lets
                the error leave its ``conn.transaction()`` block).
        """
        import psycopg

        if not a.rows:
            row = conn.execute(self._token, (a.run_id,)).fetchone()
            current = int(row[0]) if row else 0
            if current != a.token:
                raise _stale(a.run_id, a.token, current)
            return
        seqs, types, datas = _columns(a.rows)
        params = {"run": a.run_id, "seqs": seqs, "types": types, "datas": datas, "token": a.token}
        try:
            written = conn.execute(self._guarded, params).rowcount
        except psycopg.errors.UniqueViolation:
            raise _taken(a.run_id, a.rows[0][0]) from None
        if written != len(a.rows):  # the guard matched nothing: another driver holds the run
            row = conn.execute(self._token, (a.run_id,)).fetchone()
            raise _stale(a.run_id, a.token, int(row[0]) if row else 0)

    def stored(self, conn: Connection[Any], run_id: str, rows: Sequence[Row]) -> bool:
        """Whether ``rows`` are stored exactly as given (a retried commit that landed)."""
        return self._already_written(conn, [Append(run_id, rows, 0)])

    def _already_written(self, conn: Connection[Any], batch: Sequence[Append]) -> bool:
        """Whether every row of ``batch`` is stored exactly as given (a retried commit that landed).

        The rows of a batch commit together with its summaries, so stored rows
        mean the whole batch landed; a batch without rows cannot tell and is redone.
        """
        if not any(a.rows for a in batch):
            return False
        for a in batch:
            if not a.rows:
                continue
            stored = conn.execute(
                self.db.sql(
                    "SELECT seq, type, data FROM {s}.events WHERE run_id = %s AND seq BETWEEN %s AND %s "
                    "ORDER BY seq"
                ),
                (a.run_id, a.rows[0][0], a.rows[-1][0]),
            ).fetchall()
            if [tuple(r) for r in stored] != [tuple(r) for r in a.rows]:
                return False
        return True

    def fence(self, run_id: str) -> int:
        """Take a new fencing token for a run; every older token becomes stale.

        The token this process's claim of the run took in its statement (``Handover``) is handed over once.
        """
        self._fresh.drop(run_id)
        given = self.db.handover.take_token(run_id)
        if given is not None:
            token, empty = given
            if empty:  # the claim saw no event: the read that follows costs no query
                self._fresh.mark(run_id)
            return token

        def op(conn: Connection[Any], attempt: int) -> int:
            row = conn.execute(
                self.db.sql(
                    "INSERT INTO {s}.runs (run_id, token) VALUES (%s, 1) "
                    "ON CONFLICT (run_id) DO UPDATE SET token = {s}.runs.token + 1 RETURNING token"
                ),
                (run_id,),
            ).fetchone()
            assert row is not None
            return int(row[0])

        return self.db.run(op, run_id=run_id)

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        """Append ``snapshot`` and delete every row of the run strictly before it."""
        import psycopg

        def op(conn: Connection[Any], attempt: int) -> None:
            with conn.transaction():
                row = conn.execute(self._token, (run_id,)).fetchone()
                current = int(row[0]) if row else 0
                if current != token:
                    raise _stale(run_id, token, current)
                try:
                    with conn.transaction():
                        conn.execute(
                            self.db.sql(
                                "INSERT INTO {s}.events (run_id, seq, type, data) VALUES (%s, %s, %s, %s)"
                            ),
                            (run_id, *snapshot),
                        )
                except psycopg.errors.UniqueViolation:
                    stored = conn.execute(
                        self.db.sql("SELECT seq, type, data FROM {s}.events WHERE run_id = %s AND seq = %s"),
                        (run_id, snapshot[0]),
                    ).fetchone()
                    if not (attempt and stored is not None and tuple(stored) == tuple(snapshot)):
                        raise _taken(run_id, snapshot[0]) from None
                conn.execute(
                    self.db.sql("DELETE FROM {s}.events WHERE run_id = %s AND seq < %s"),
                    (run_id, snapshot[0]),
                )

        self.db.run(op, run_id=run_id)

    def delete_run(self, run_id: str) -> None:
        """Remove a run: its rows, its summary and its fencing token."""

        def op(conn: Connection[Any], attempt: int) -> None:
            with conn.transaction():
                conn.execute(self.db.sql("DELETE FROM {s}.events WHERE run_id = %s"), (run_id,))
                conn.execute(self.db.sql("DELETE FROM {s}.runs WHERE run_id = %s"), (run_id,))

        self.db.run(op, run_id=run_id)

    def delete_runs(self, run_ids: Sequence[str]) -> list[str]:
        """Remove many finished runs in one transaction: rows, summaries, messages, outbox and control.

        A run that is not finished, or whose lease a live driver holds, is
        kept: the check and the deletes are one transaction, so a driver that
        takes a run up meanwhile keeps it. ``gc`` calls it a batch at a time.

        Returns:
            The runs deleted.
        """
        doomed = self.db.sql(
            "SELECT r.run_id FROM {s}.runs r WHERE r.run_id = ANY(%s) "
            "AND r.status IN ('completed', 'failed', 'cancelled') AND NOT EXISTS (SELECT 1 FROM {s}.leases l "
            "WHERE l.name = 'run:' || r.run_id AND l.expires_at >= clock_timestamp()) FOR UPDATE OF r"
        )
        deletes = [
            self.db.sql(f"DELETE FROM {{s}}.{table} WHERE run_id = ANY(%s)")
            for table in ("events", "messages", "outbox", "control", "runs")
        ]

        def op(conn: Connection[Any], attempt: int) -> list[str]:
            with conn.transaction():
                ids = [r[0] for r in conn.execute(doomed, (list(run_ids),))]
                for delete in deletes:
                    conn.execute(delete, (ids,))
            return ids

        return self.db.run(op)

    def vacuum(self) -> None:
        """``VACUUM FULL`` the event and run tables: the space of deleted rows goes back to the disk.

        It rewrites each table under an exclusive lock (the world waits for it
        while it runs): run it in a quiet moment, after a large ``gc``.
        """

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(self.db.sql("VACUUM FULL {s}.events, {s}.runs"))

        self.db.run(op)

    def get_meta(self, name: str) -> str | None:
        """A fact about the log as a whole (its key check), or ``None``; reading writes nothing."""

        def op(conn: Connection[Any], attempt: int) -> str | None:
            row = conn.execute(
                self.db.sql("SELECT value FROM {s}.documents WHERE namespace = 'meta' AND key = %s"),
                (name,),
            ).fetchone()
            return None if row is None else str(row[0])

        return self.db.run(op)

    def set_meta(self, name: str, value: str) -> None:
        """Record a fact about the log as a whole."""

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(
                self.db.sql(
                    "INSERT INTO {s}.documents (namespace, key, value) VALUES ('meta', %s, %s) "
                    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value"
                ),
                (name, value),
            )

        self.db.run(op)

    # -- stores beside the log -----------------------------------------------

    def message_store(self) -> PostgresMessages:
        """The world's messages (``messages`` table), written in this log's transactions."""
        from ..messages._postgres import PostgresMessages

        return PostgresMessages(self)

    def outbox_store(self) -> PostgresOutbox:
        """The world's outbox (``outbox`` table), whose entries commit with this log's rows."""
        from ..outbox._postgres import PostgresOutbox

        return PostgresOutbox(self)

    # -- reading -------------------------------------------------------------

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        """All rows of a run above ``after_seq``, in seq order, in one query."""
        if self._fresh.read_as_empty(run_id):
            return []

        def op(conn: Connection[Any], attempt: int) -> list[Row]:
            cur = conn.execute(
                self.db.sql(
                    "SELECT seq, type, data FROM {s}.events WHERE run_id = %s AND seq > %s ORDER BY seq"
                ),
                (run_id, after_seq),
            )
            return [(int(r[0]), r[1], r[2]) for r in cur]

        return self.db.run(op, run_id=run_id)

    def iter_rows(self, run_id: str, after_seq: int = 0, chunk: int = 4096) -> Iterator[Row]:
        """The rows of ``read``, fetched ``chunk`` rows per query as they are consumed.

        No connection is held between chunks, so an abandoned iterator holds nothing.
        """
        if self._fresh.read_as_empty(run_id):
            return
        query = self.db.sql(
            "SELECT seq, type, data FROM {s}.events WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s"
        )
        while True:
            params = (run_id, after_seq, chunk)

            def op(conn: Connection[Any], attempt: int, params: tuple[str, int, int] = params) -> list[Row]:
                return [(int(r[0]), r[1], r[2]) for r in conn.execute(query, params)]

            rows = self.db.run(op, run_id=run_id)
            yield from rows
            if len(rows) < chunk:
                return
            after_seq = rows[-1][0]

    def close(self) -> None:
        """Close the pool when this log owns it (otherwise the world closes it)."""
        if self._owns:
            self.db.close()
