"""``PostgresControl``: the runtime's control records in a Postgres world, shared by every worker.

Claims honour every queue limit globally: a claim takes the queue's
advisory transaction lock (so two workers never both count the same free
slot), counts the queue's runs in flight, its recent claims and its
partitions, and picks the waiting runs with ``SELECT ... FOR UPDATE SKIP
LOCKED`` in priority then FIFO order (a row that another transaction is
cancelling right now is skipped, not waited for). A dedup id is checked under
the same lock. Every write that changes what a worker or a waiting handle
should do announces itself with ``NOTIFY`` at commit; ``version()`` counts
those announcements locally (``Notifier``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..postgres._notify import Notifier, notify
from ..postgres._schema import Database
from ._protocol import (
    ControlRecord,
    QueueLimits,
    _partition_free,
    _room,
    adopted,
    claimed_by,
    debounced,
    reopened,
)

if TYPE_CHECKING:
    from psycopg import Connection

_FIELDS = [f.name for f in dataclasses.fields(ControlRecord)]
_COLUMNS = ", ".join(_FIELDS)

_PICK = (
    "WITH picked AS (SELECT run_id FROM {s}.control WHERE queue = %(queue)s AND state = 'enqueued' "
    "{only}AND (start_at IS NULL OR start_at <= %(now)s) ORDER BY priority, seq LIMIT %(n)s "
    "FOR UPDATE SKIP LOCKED), "
    "claimed AS (UPDATE {s}.control AS c SET state = 'claimed', owner = %(owner)s, pid = %(pid)s, "
    "host = %(host)s, claimed_at = %(now)s, drives = c.drives + 1, driven_at = %(now)s "
    "FROM picked WHERE c.run_id = picked.run_id RETURNING " + ", ".join(f"c.{f}" for f in _FIELDS) + ") "
)
"""The waiting runs of a queue without limits, picked and claimed (the statement's first part)."""

_CLAIM = _PICK + "SELECT *, NULL::bigint FROM claimed ORDER BY priority, seq"
"""A claim of a queue without limits in one autocommitted statement (no advisory lock: nothing to count)."""

_CLAIM_LEASED = (
    _PICK + ", leased AS (INSERT INTO {s}.leases (name, holder, pid, host, expires_at) "
    "SELECT 'run:' || run_id, %(holder)s, %(pid)s, %(host)s, "
    "clock_timestamp() + make_interval(secs => %(lease)s) FROM claimed "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, "
    "host = excluded.host, expires_at = excluded.expires_at "
    "WHERE {s}.leases.expires_at < clock_timestamp() RETURNING substr(name, 5) AS run_id), "
    "fenced AS (INSERT INTO {s}.runs (run_id, token) SELECT run_id, 1 FROM leased "
    "ON CONFLICT (run_id) DO UPDATE SET token = {s}.runs.token + 1 RETURNING run_id, token) "
    "SELECT claimed.*, fenced.token FROM claimed LEFT JOIN fenced USING (run_id) "
    "ORDER BY claimed.priority, claimed.seq"
)
"""``_CLAIM`` that also takes each claimed run's lease and a new fencing token for the driver to come.

A run whose lease is live (another holder) is claimed without either, as a
claim followed by a failed ``try_acquire`` leaves it.
"""

_FINISH = (
    "WITH e AS (SELECT * FROM unnest(%(runs)s::text[], %(states)s::text[]) AS e(run_id, state)), "
    "u AS (UPDATE {s}.control AS c SET state = e.state, cancel_reason = NULL, resume = NULL, drives = 0, "
    "blocked = NULL FROM e WHERE c.run_id = e.run_id RETURNING c.queue), "
    "d AS (DELETE FROM {s}.leases AS l USING unnest(%(names)s::text[], %(holders)s::text[]) "
    "AS h(name, holder) WHERE l.name = h.name AND l.holder = h.holder) "
    "SELECT pg_notify(%(chan)s, 'run:' || e.run_id) FROM e "
    "UNION ALL SELECT pg_notify(%(chan)s, 'queue:' || q.queue) FROM (SELECT DISTINCT queue FROM u "
    "WHERE queue IS NOT NULL) AS q"
)
"""Runs' ends in one autocommitted statement: their records, the leases this process holds on them, and
the announcements (each run's, then each queue's whose slot is free again), delivered at the commit."""


def _record(row: Sequence[Any]) -> ControlRecord:
    return ControlRecord(*row)


def _queue_key(schema: str, queue: str | None) -> int:
    digest = hashlib.sha256(f"durable-queue:{schema}:{queue}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class PostgresControl:
    """Control records in the ``control`` table (``RunControl`` protocol).

    Args:
        db: The pool and schema.
        dsn: The connection string of the listener (``None``: no listener; ``version()``
            then changes at every call, so that pollers always look).
    """

    def __init__(self, db: Database, dsn: str | None = None):
        self.db = db
        self.dsn = dsn
        self.notifier: Notifier | None = None
        self._closed = False
        self._polled = 0
        self._get_sql = db.sql(f"SELECT {_COLUMNS} FROM {{s}}.control WHERE run_id = %s")
        marks = ", ".join(["%s"] * len(_FIELDS))
        updates = ", ".join(f"{f} = excluded.{f}" for f in _FIELDS if f != "run_id")
        self._put_sql = db.sql(
            f"INSERT INTO {{s}}.control ({_COLUMNS}) VALUES ({marks}) "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates}"
        )
        new_marks = ", ".join("nextval('{s}.control_seq')" if f == "seq" else "%s" for f in _FIELDS)
        self._claim_sql: dict[tuple[bool, bool], str] = {}
        self._finish_sql = db.sql(_FINISH)
        self._submit_sql = db.sql(
            f"WITH ins AS (INSERT INTO {{s}}.control ({_COLUMNS}) VALUES ({new_marks}) "
            f"ON CONFLICT (run_id) DO NOTHING RETURNING {_COLUMNS}) "
            "SELECT ins.*, pg_notify(%s, %s) FROM ins"
        )

    # -- helpers ---------------------------------------------------------------

    def _get(self, conn: Connection[Any], run_id: str, *, lock: bool = False) -> ControlRecord | None:
        row = conn.execute(self._get_sql + (" FOR UPDATE" if lock else ""), (run_id,)).fetchone()
        return None if row is None else _record(row)

    def _put(self, conn: Connection[Any], rec: ControlRecord) -> ControlRecord:
        conn.execute(self._put_sql, dataclasses.astuple(rec))
        return rec

    def _next_seq(self, conn: Connection[Any]) -> int:
        row = conn.execute(self.db.sql("SELECT nextval('{s}.control_seq')")).fetchone()
        assert row is not None
        return int(row[0])

    def _announce(self, conn: Connection[Any], what: str) -> None:
        notify(conn, self.db.channel, what)

    # -- the protocol ------------------------------------------------------------

    def submit(self, record: ControlRecord) -> ControlRecord:
        if record.dedup_id is None and record.debounce_key is None:
            plain = self.db.run(lambda conn, attempt: self._submit_plain(conn, record), run_id=record.run_id)
            if plain is not None:
                return plain

        def op(conn: Connection[Any], attempt: int) -> ControlRecord:
            with conn.transaction():
                if record.dedup_id is not None or record.debounce_key is not None:
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s)", (_queue_key(self.db.schema, record.queue),)
                    )
                old = self._get(conn, record.run_id)
                if old is not None:
                    return old
                if record.dedup_id is not None:
                    row = conn.execute(
                        self.db.sql(
                            f"SELECT {_COLUMNS} FROM {{s}}.control WHERE queue IS NOT DISTINCT FROM %s "
                            "AND dedup_id = %s AND state IN ('enqueued', 'claimed', 'blocked', 'waiting') "
                            "LIMIT 1"
                        ),
                        (record.queue, record.dedup_id),
                    ).fetchone()
                    if row is not None:
                        return _record(row)
                if record.debounce_key is not None:
                    row = conn.execute(
                        self.db.sql(
                            f"SELECT {_COLUMNS} FROM {{s}}.control WHERE queue IS NOT DISTINCT FROM %s "
                            "AND debounce_key = %s AND state = 'enqueued' LIMIT 1"
                        ),
                        (record.queue, record.debounce_key),
                    ).fetchone()
                    if row is not None:
                        return self._put(conn, debounced(_record(row), record))
                rec = self._put(conn, dataclasses.replace(record, seq=self._next_seq(conn)))
                self._announce(conn, f"queue:{record.queue or ''}")
                return rec

        return self.db.run(op, run_id=record.run_id)

    def _submit_plain(self, conn: Connection[Any], record: ControlRecord) -> ControlRecord | None:
        """A submit without dedup or debounce: one autocommitted statement with its announcement.

        The record is inserted with the next submission seq unless the run has
        one already (then that one is returned, as ``submit`` does); ``None``
        when the record went away in between (the caller takes the long way).
        """
        values = [v for f, v in zip(_FIELDS, dataclasses.astuple(record), strict=True) if f != "seq"]
        row = conn.execute(
            self._submit_sql, (*values, self.db.channel, f"queue:{record.queue or ''}")
        ).fetchone()
        if row is not None:
            return _record(row[:-1])  # the last column is pg_notify's (void)
        return self._get(conn, record.run_id)

    def get(self, run_id: str) -> ControlRecord | None:
        return self.db.run(lambda conn, attempt: self._get(conn, run_id), run_id=run_id)

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
        sql = self.db.sql
        if limits.concurrency is None and limits.rate_limit is None and limits.partition_concurrency is None:
            return self._claim_unlimited(limits.name, owner, pid, host, room, now, workflows)

        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_queue_key(self.db.schema, limits.name),))
                got = conn.execute(
                    sql("SELECT count(*) FROM {s}.control WHERE queue = %s AND state = 'claimed'"),
                    (limits.name,),
                ).fetchone()
                inflight = int(got[0]) if got else 0
                claims: list[float | None] = []
                if limits.rate_limit is not None:
                    claims = [
                        r[0]
                        for r in conn.execute(
                            sql("SELECT claimed_at FROM {s}.control WHERE queue = %s AND claimed_at > %s"),
                            (limits.name, now - limits.rate_limit[1]),
                        )
                    ]
                free = _room(limits, room, inflight, claims, now)
                if free <= 0:
                    return []
                parts: dict[str | None, int] = {}
                if limits.partition_concurrency is not None:
                    for key, n in conn.execute(
                        sql(
                            "SELECT partition_key, count(*) FROM {s}.control WHERE queue = %s "
                            "AND state = 'claimed' GROUP BY partition_key"
                        ),
                        (limits.name,),
                    ):
                        parts[key] = int(n)
                scan = free if limits.partition_concurrency is None else max(free * 8, 64)
                only = "AND workflow = ANY(%s) " if workflows is not None else ""
                args: list[object] = [limits.name]
                if workflows is not None:
                    args.append(sorted(workflows))
                args += [now, scan]
                waiting = [
                    _record(r)
                    for r in conn.execute(
                        sql(
                            f"SELECT {_COLUMNS} FROM {{s}}.control WHERE queue = %s AND state = 'enqueued' "
                            f"{only}AND (start_at IS NULL OR start_at <= %s) "
                            "ORDER BY priority, seq LIMIT %s FOR UPDATE SKIP LOCKED"
                        ),
                        args,
                    )
                ]
                out: list[ControlRecord] = []
                for r in waiting:
                    if len(out) >= free:
                        break
                    if not _partition_free(limits, parts, r.partition_key):
                        continue
                    parts[r.partition_key] = parts.get(r.partition_key, 0) + 1
                    out.append(claimed_by(r, owner, pid, host, now))
                if out:
                    conn.execute(
                        sql(
                            "UPDATE {s}.control SET state = 'claimed', owner = %s, pid = %s, host = %s, "
                            "claimed_at = %s, drives = drives + 1, driven_at = %s WHERE run_id = ANY(%s)"
                        ),
                        (owner, pid, host, now, now, [r.run_id for r in out]),
                    )
                return out

        return self.db.run(op)

    def _claim_unlimited(
        self,
        queue: str,
        owner: str,
        pid: int,
        host: str,
        room: int,
        now: float,
        workflows: Collection[str] | None,
    ) -> list[ControlRecord]:
        """``claim`` of a queue without limits: one statement, with the runs' leases and tokens.

        Nothing is counted, so no advisory lock is needed: ``SKIP LOCKED``
        keeps two workers off the same run. With the world's locks on this
        database the statement also takes each run's lease and a new
        fencing token, handed to this process's next ``try_acquire`` and
        ``fence`` of the run (``Handover``); the lease is in the table and
        the token bumped before the claim returns, as if the driver had taken them.
        """
        if room <= 0:
            return []
        book = self.db.handover
        lease = book.lease
        only = "AND workflow = ANY(%(workflows)s) " if workflows is not None else ""
        query = self._claim_sql.get((lease is not None, workflows is not None))
        if query is None:
            text = (_CLAIM if lease is None else _CLAIM_LEASED).replace("{only}", only)
            query = self._claim_sql[(lease is not None, workflows is not None)] = self.db.sql(text)
        holder = uuid.uuid4().hex
        params: dict[str, object] = {
            "queue": queue,
            "now": now,
            "n": room,
            "owner": owner,
            "pid": pid,
            "host": host,
            "holder": holder,
            "lease": lease,
        }
        if workflows is not None:
            params["workflows"] = sorted(workflows)

        def op(conn: Connection[Any], attempt: int) -> list[tuple[ControlRecord, int | None]]:
            return [(_record(r[:-1]), r[-1]) for r in conn.execute(query, params)]

        out = []
        for rec, token in self.db.run(op):
            if token is not None:
                book.give(rec.run_id, holder, int(token))
            out.append(rec)
        return out

    def adopt(
        self, run_id: str, workflow: str, *, owner: str, pid: int, host: str, now: float
    ) -> ControlRecord:
        def op(conn: Connection[Any], attempt: int) -> ControlRecord:
            with conn.transaction():
                old = self._get(conn, run_id, lock=True)
                if old is None:
                    old = ControlRecord(run_id, workflow, created_at=now, seq=self._next_seq(conn))
                return self._put(conn, adopted(old, workflow, owner, pid, host, now))

        return self.db.run(op, run_id=run_id)

    def finish(self, run_id: str, state: str) -> None:
        self.finish_many([(run_id, state)])

    def finish_many(self, ends: Sequence[tuple[str, str]]) -> None:
        """End the records in one statement (``_FINISH``); the leases this process holds on them go too.

        A lease deleted here is not sent again by the ``release`` that follows.
        """
        if not ends:
            return
        leases = self.db.handover.holders([f"run:{run_id}" for run_id, _ in ends])
        params = {
            "runs": [run_id for run_id, _ in ends],
            "states": [state for _, state in ends],
            "names": list(leases),
            "holders": list(leases.values()),
            "chan": self.db.channel,
        }

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(self._finish_sql, params)

        self.db.run(op, run_id=ends[0][0])
        self.db.handover.ended(leases)

    def delete(self, run_ids: Sequence[str]) -> None:
        if not run_ids:
            return

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(self.db.sql("DELETE FROM {s}.control WHERE run_id = ANY(%s)"), (list(run_ids),))

        self.db.run(op, run_id=run_ids[0])

    def block(self, run_id: str, blocked: str) -> None:
        def op(conn: Connection[Any], attempt: int) -> None:
            with conn.transaction():
                conn.execute(
                    self.db.sql("UPDATE {s}.control SET state = 'blocked', blocked = %s WHERE run_id = %s"),
                    (blocked, run_id),
                )
                self._announce(conn, f"run:{run_id}")

        self.db.run(op, run_id=run_id)

    def wait_for_code(self, run_id: str, waiting: str) -> None:
        def op(conn: Connection[Any], attempt: int) -> None:
            with conn.transaction():
                conn.execute(
                    self.db.sql(
                        "UPDATE {s}.control SET state = 'waiting', owner = NULL, pid = NULL, host = NULL, "
                        "blocked = %s WHERE run_id = %s"
                    ),
                    (waiting, run_id),
                )
                self._announce(conn, f"run:{run_id}")

        self.db.run(op, run_id=run_id)

    def uncount(self, run_id: str) -> None:
        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(
                self.db.sql("UPDATE {s}.control SET drives = GREATEST(drives - 1, 0) WHERE run_id = %s"),
                (run_id,),
            )

        self.db.run(op, run_id=run_id)

    def request_cancel(self, run_id: str, reason: str, now: float) -> ControlRecord:
        def op(conn: Connection[Any], attempt: int) -> ControlRecord:
            with conn.transaction():
                old = self._get(conn, run_id, lock=True)
                if old is None:
                    old = ControlRecord(run_id, "", state="claimed", created_at=now, seq=self._next_seq(conn))
                if old.state in ("done", "cancelled"):
                    return old
                self._announce(conn, f"cancel:{run_id}")
                if old.state == "enqueued":
                    self._announce(conn, f"run:{run_id}")
                    return self._put(conn, dataclasses.replace(old, state="cancelled", cancel_reason=reason))
                return self._put(conn, dataclasses.replace(old, cancel_reason=reason))

        return self.db.run(op, run_id=run_id)

    def cancel_requests(self, run_ids: Iterable[str]) -> dict[str, str]:
        ids = list(run_ids)
        if not ids:
            return {}

        def op(conn: Connection[Any], attempt: int) -> dict[str, str]:
            cur = conn.execute(
                self.db.sql(
                    "SELECT run_id, cancel_reason FROM {s}.control WHERE run_id = ANY(%s) "
                    "AND cancel_reason IS NOT NULL AND state = 'claimed'"
                ),
                (ids,),
            )
            return {r[0]: r[1] for r in cur}

        return self.db.run(op)

    def reopen(self, run_id: str, resume: str | None) -> ControlRecord | None:
        def op(conn: Connection[Any], attempt: int) -> ControlRecord | None:
            with conn.transaction():
                old = self._get(conn, run_id, lock=True)
                if old is None:
                    return None
                state = "enqueued" if old.queue is not None else "claimed"
                rec = self._put(conn, reopened(old, state, resume))
                self._announce(conn, f"queue:{old.queue or ''}")
                return rec

        return self.db.run(op, run_id=run_id)

    def claimed(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(self.db.sql(f"SELECT {_COLUMNS} FROM {{s}}.control WHERE state = 'claimed'"))
            return [_record(r) for r in cur]

        return self.db.run(op)

    def waiting_records(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(self.db.sql(f"SELECT {_COLUMNS} FROM {{s}}.control WHERE state = 'waiting'"))
            return [_record(r) for r in cur]

        return self.db.run(op)

    def blocked_records(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(self.db.sql(f"SELECT {_COLUMNS} FROM {{s}}.control WHERE state = 'blocked'"))
            return [_record(r) for r in cur]

        return self.db.run(op)

    def records(self, run_ids: Sequence[str]) -> dict[str, ControlRecord]:
        ids = list(run_ids)
        if not ids:
            return {}

        def op(conn: Connection[Any], attempt: int) -> dict[str, ControlRecord]:
            cur = conn.execute(
                self.db.sql(f"SELECT {_COLUMNS} FROM {{s}}.control WHERE run_id = ANY(%s)"), (ids,)
            )
            return {rec.run_id: rec for rec in map(_record, cur)}

        return self.db.run(op)

    def unstarted(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(
                self.db.sql(
                    f"SELECT {_COLUMNS} FROM {{s}}.control WHERE claimed_at IS NULL "
                    "AND state IN ('enqueued', 'cancelled') ORDER BY seq"
                )
            )
            return [_record(r) for r in cur]

        return self.db.run(op)

    def _listener(self) -> Notifier | None:
        """The listener, started on first use (a world that only runs workflows never opens it)."""
        if self.notifier is None and self.dsn is not None and not self._closed:
            self.notifier = Notifier(self.dsn, self.db.channel)
            self.notifier.wait_ready(5.0)
        return self.notifier

    def version(self) -> int:
        """The number of announcements this process heard (a local read, no query)."""
        listener = self._listener()
        if listener is not None:
            return listener.count
        self._polled += 1  # without a listener every poll may be a change
        return self._polled

    def subscribe(
        self, on_change: Callable[[], None], about: Collection[str] = ()
    ) -> Callable[[], None] | None:
        """Call ``on_change`` at every announcement heard that ``about`` names, and at every reconnect.

        ``None`` without a listener (the caller polls).
        """
        listener = self._listener()
        if listener is None:
            return None
        exact = frozenset(a for a in about if not a.endswith(":"))
        prefixes = tuple(a for a in about if a.endswith(":"))

        def heard(payload: str | None) -> None:
            # None: a reconnect, after which anything may have changed.
            if not about or payload is None or payload in exact or payload.startswith(prefixes):
                on_change()

        listener.listeners.append(heard)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                listener.listeners.remove(heard)

        return stop

    def close(self) -> None:
        """Stop the listener (the world closes the pool)."""
        self._closed = True
        if self.notifier is not None:
            self.notifier.close()
