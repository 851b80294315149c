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

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..log._protocol import RunInfo
from ..postgres._notify import Notifier, notify
from ..postgres._schema import Database, world_lock
from ._postgres_claims import COLUMNS, FIELDS, claim_limited, claim_unlimited, queue_key, to_record
from ._protocol import (
    ControlRecord,
    QueueLimits,
    WorkerRecord,
    adopted,
    debounced,
    reopened,
)

if TYPE_CHECKING:
    from psycopg import Connection

_FINISH = (
    "WITH e AS (SELECT * FROM unnest(%(runs)b::text[], %(states)b::text[]) AS e(run_id, state)), "
    "u AS (UPDATE {s}.control AS c SET state = e.state, cancel_reason = NULL, resume = NULL, drives = 0, "
    "blocked = NULL FROM e WHERE c.run_id = e.run_id RETURNING c.queue), "
    "d AS (DELETE FROM {s}.leases AS l USING unnest(%(names)b::text[], %(holders)b::text[]) "
    "AS h(name, holder) WHERE l.name = h.name AND l.holder = h.holder) "
    "SELECT pg_notify(%(chan)s, 'run:' || e.run_id) FROM e WHERE NOT EXISTS (SELECT 1 FROM {s}.runs AS r "
    "WHERE r.run_id = e.run_id AND r.status IN ('completed', 'failed', 'cancelled')) "
    "UNION ALL SELECT pg_notify(%(chan)s, 'free:' || q.queue) FROM (SELECT DISTINCT queue FROM u "
    "WHERE queue IS NOT NULL) AS q"
)
"""Runs' ends in one autocommitted statement: their records, the leases this process holds on them, and
the announcements, delivered at the commit: each run's unless its log's end announced it already (the
status a waiter reads is the log's then), and ``free:<queue>`` for each queue whose slot is free again."""

_WITH_INFO = (
    "SELECT " + ", ".join(f"c.{f}" for f in FIELDS) + ", r.run_id, r.workflow, r.status, r.parent_run_id, "
    "r.created_at, r.updated_at FROM (SELECT 1) AS one "
    "LEFT JOIN {s}.control AS c ON c.run_id = %(run)s "
    "LEFT JOIN {s}.runs AS r ON r.run_id = %(run)s AND r.workflow != ''"
)
"""A run's control record and its log's summary in one query (either may be missing)."""


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
        self._get_sql = db.sql(f"SELECT {COLUMNS} FROM {{s}}.control WHERE run_id = %s")
        marks = ", ".join(["%s"] * len(FIELDS))
        updates = ", ".join(f"{f} = excluded.{f}" for f in FIELDS if f != "run_id")
        self._put_sql = db.sql(
            f"INSERT INTO {{s}}.control ({COLUMNS}) VALUES ({marks}) "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates}"
        )
        new_marks = ", ".join("nextval('{s}.control_seq')" if f == "seq" else "%s" for f in FIELDS)
        self._claim_sql: dict[tuple[bool, bool], str] = {}
        self._finish_sql = db.sql(_FINISH)
        self._with_info_sql = db.sql(_WITH_INFO)
        insert = (
            f"WITH ins AS (INSERT INTO {{s}}.control ({COLUMNS}) VALUES ({new_marks}) "
            f"ON CONFLICT (run_id) DO NOTHING RETURNING {COLUMNS}) "
        )
        # A queued run is announced to the workers; a run without a queue is its own
        # process's (no worker claims it), so its insert says nothing (the last column alike).
        self._submit_sql = {
            True: db.sql(insert + "SELECT ins.*, pg_notify(%s, %s) FROM ins"),
            False: db.sql(insert + "SELECT ins.*, NULL FROM ins"),
        }

    # -- helpers ---------------------------------------------------------------

    def _get(self, conn: Connection[Any], run_id: str, *, lock: bool = False) -> ControlRecord | None:
        row = conn.execute(self._get_sql + (" FOR UPDATE" if lock else ""), (run_id,)).fetchone()
        return None if row is None else to_record(row)

    def _put(self, conn: Connection[Any], rec: ControlRecord) -> ControlRecord:
        conn.execute(self._put_sql, [getattr(rec, f) for f in FIELDS])  # astuple deep-copies
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
                        "SELECT pg_advisory_xact_lock(%s)", (queue_key(self.db.schema, record.queue),)
                    )
                old = self._get(conn, record.run_id)
                if old is not None:
                    return old
                if record.dedup_id is not None:
                    row = conn.execute(
                        self.db.sql(
                            f"SELECT {COLUMNS} FROM {{s}}.control WHERE queue IS NOT DISTINCT FROM %s "
                            "AND dedup_id = %s AND state IN ('enqueued', 'claimed', 'blocked', 'waiting') "
                            "LIMIT 1"
                        ),
                        (record.queue, record.dedup_id),
                    ).fetchone()
                    if row is not None:
                        return to_record(row)
                if record.debounce_key is not None:
                    row = conn.execute(
                        self.db.sql(
                            f"SELECT {COLUMNS} FROM {{s}}.control WHERE queue IS NOT DISTINCT FROM %s "
                            "AND debounce_key = %s AND state = 'enqueued' LIMIT 1"
                        ),
                        (record.queue, record.debounce_key),
                    ).fetchone()
                    if row is not None:
                        return self._put(conn, debounced(to_record(row), record))
                rec = self._put(conn, dataclasses.replace(record, seq=self._next_seq(conn)))
                if record.queue is not None:  # news for the workers of its queue only
                    self._announce(conn, f"queue:{record.queue}")
                return rec

        return self.db.run(op, run_id=record.run_id)

    def _submit_plain(self, conn: Connection[Any], record: ControlRecord) -> ControlRecord | None:
        """A submit without dedup or debounce: one autocommitted statement, a queued run's announcement in it.

        The record is inserted with the next submission seq unless the run has
        one already (then that one is returned, as ``submit`` does); ``None``
        when the record went away in between (the caller takes the long way).
        """
        values = [getattr(record, f) for f in FIELDS if f != "seq"]
        if record.queue is not None:
            row = conn.execute(self._submit_sql[True], (*values, self.db.channel, f"queue:{record.queue}"))
        else:
            row = conn.execute(self._submit_sql[False], values)
        made = row.fetchone()
        if made is not None:
            return to_record(made[:-1])  # the last column is pg_notify's (void) or a NULL
        return self._get(conn, record.run_id)

    def get(self, run_id: str) -> ControlRecord | None:
        return self.db.run(lambda conn, attempt: self._get(conn, run_id), run_id=run_id)

    def read_with_info(self, run_id: str) -> tuple[RunInfo | None, ControlRecord | None]:
        """The run's log summary (``PostgresLog.info``) and its control record (``get``) in one query.

        A waiting handle reads both at every look, so one round trip instead of two.
        """
        n = len(FIELDS)

        def op(conn: Connection[Any], attempt: int) -> tuple[RunInfo | None, ControlRecord | None]:
            row = conn.execute(self._with_info_sql, {"run": run_id}).fetchone()
            assert row is not None  # one row always: both sides are outer joins
            rec = None if row[0] is None else to_record(row[:n])
            info = None if row[n] is None else RunInfo(*row[n:])
            return info, rec

        return self.db.run(op, run_id=run_id)

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
        who = (owner, pid, host)
        if limits.concurrency is None and limits.rate_limit is None and limits.partition_concurrency is None:
            return claim_unlimited(self.db, self._claim_sql, limits.name, who, room, now, workflows)
        return claim_limited(self.db, limits, who, room, now, workflows)

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
        A record that its run's log end ended already, with the same state and
        its lease (``PostgresLog``), sends nothing.
        """
        ends = self.db.handover.unfinished(list(ends))
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
                    "SELECT run_id, cancel_reason FROM {s}.control WHERE run_id = ANY(%b) "
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
            cur = conn.execute(self.db.sql(f"SELECT {COLUMNS} FROM {{s}}.control WHERE state = 'claimed'"))
            return [to_record(r) for r in cur]

        return self.db.run(op)

    def waiting_records(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(self.db.sql(f"SELECT {COLUMNS} FROM {{s}}.control WHERE state = 'waiting'"))
            return [to_record(r) for r in cur]

        return self.db.run(op)

    def blocked_records(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(self.db.sql(f"SELECT {COLUMNS} FROM {{s}}.control WHERE state = 'blocked'"))
            return [to_record(r) for r in cur]

        return self.db.run(op)

    def records(self, run_ids: Sequence[str]) -> dict[str, ControlRecord]:
        ids = list(run_ids)
        if not ids:
            return {}

        def op(conn: Connection[Any], attempt: int) -> dict[str, ControlRecord]:
            cur = conn.execute(
                self.db.sql(f"SELECT {COLUMNS} FROM {{s}}.control WHERE run_id = ANY(%s)"), (ids,)
            )
            return {rec.run_id: rec for rec in map(to_record, cur)}

        return self.db.run(op)

    def unstarted(self) -> list[ControlRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
            cur = conn.execute(
                self.db.sql(
                    f"SELECT {COLUMNS} FROM {{s}}.control WHERE claimed_at IS NULL "
                    "AND state IN ('enqueued', 'cancelled') ORDER BY seq"
                )
            )
            return [to_record(r) for r in cur]

        return self.db.run(op)

    def _listener(self) -> Notifier | None:
        """The listener, started on first use (a world that only runs workflows never opens it)."""
        if self.notifier is None and self.dsn is not None and not self._closed:
            self.notifier = Notifier(self.dsn, self.db.channel, world_lock(self.db.schema))
            self.notifier.wait_ready(5.0)
        return self.notifier

    def register_worker(self, worker: WorkerRecord) -> None:
        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(
                self.db.sql(
                    "INSERT INTO {s}.workers (name, pid, host, started_at, code, queues) "
                    "VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET pid = excluded.pid, host = excluded.host, "
                    "started_at = excluded.started_at, code = excluded.code, queues = excluded.queues"
                ),
                (
                    worker.name,
                    worker.pid,
                    worker.host,
                    worker.started_at,
                    worker.code,
                    json.dumps(worker.queues),
                ),
            )

        self.db.run(op)

    def unregister_worker(self, name: str) -> None:
        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(self.db.sql("DELETE FROM {s}.workers WHERE name = %s"), (name,))

        self.db.run(op)

    def workers(self) -> list[WorkerRecord]:
        def op(conn: Connection[Any], attempt: int) -> list[WorkerRecord]:
            cur = conn.execute(
                self.db.sql("SELECT name, pid, host, started_at, code, queues FROM {s}.workers ORDER BY name")
            )
            return [
                WorkerRecord(n, pid, host, at, code, tuple(json.loads(qs)))
                for n, pid, host, at, code, qs in cur
            ]

        return self.db.run(op)

    def version(self) -> int:
        """The number of announcements this process heard (a local read, no query)."""
        listener = self._listener()
        if listener is not None:
            return listener.count
        self._polled += 1  # without a listener every poll may be a change
        return self._polled

    def heard_lately(self, topic: str) -> bool:
        """Whether this process heard ``topic`` announced lately (``run:<run_id>``: the run changed).

        A hint, never a fact to act on: ``RunHandle.result()`` reads a run that
        was announced as it would read an ended one, its log's last row first.
        """
        return self.notifier is not None and self.notifier.heard_lately(topic)

    def subscribe(
        self, on_change: Callable[[], None], about: Collection[str] = ()
    ) -> Callable[[], None] | None:
        """Call ``on_change`` at every announcement heard that ``about`` names, and at every reconnect.

        ``None`` without a listener (the caller polls).
        """
        listener = self._listener()
        if listener is None:
            return None
        return listener.subscribe(on_change, about)

    def close(self) -> None:
        """Stop the listener (the world closes the pool)."""
        self._closed = True
        if self.notifier is not None:
            self.notifier.close()
