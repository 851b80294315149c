"""How a Postgres world's workers claim queued runs: one statement for a queue without limits.

A queue without limits needs nothing counted, so its claim is one
autocommitted statement (``SKIP LOCKED`` keeps two workers off the same run)
that, in a world with locks, also takes each run's lease and a new fencing
token for the driver to come (``Handover``). A queue with a global,
partition or rate limit is claimed in a transaction under the queue's
advisory lock, so two workers never both count the same free slot.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..postgres._schema import Database
from ._protocol import ControlRecord, QueueLimits, _partition_free, _room, claimed_by, record_of

if TYPE_CHECKING:
    from psycopg import Connection

FIELDS = [f.name for f in dataclasses.fields(ControlRecord)]
COLUMNS = ", ".join(FIELDS)

_PICK = (
    "WITH picked AS (SELECT run_id FROM {s}.control WHERE queue = %(queue)s AND state = 'enqueued' "
    "{only}AND (start_at IS NULL OR start_at <= %(now)s) ORDER BY priority, seq LIMIT %(n)s "
    "FOR UPDATE SKIP LOCKED), "
    "claimed AS (UPDATE {s}.control AS c SET state = 'claimed', owner = %(owner)s, pid = %(pid)s, "
    "host = %(host)s, claimed_at = %(now)s, drives = c.drives + 1, driven_at = %(now)s "
    "FROM picked WHERE c.run_id = picked.run_id RETURNING " + ", ".join(f"c.{f}" for f in FIELDS) + ") "
)
"""The waiting runs of a queue without limits, picked and claimed (the statement's first part)."""

_CLAIM = _PICK + "SELECT *, NULL::bigint, NULL::boolean FROM claimed ORDER BY priority, seq"
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
    "SELECT claimed.*, fenced.token, "
    "NOT EXISTS (SELECT 1 FROM {s}.events AS e WHERE e.run_id = claimed.run_id) "
    "FROM claimed LEFT JOIN fenced USING (run_id) "
    "ORDER BY claimed.priority, claimed.seq"
)
"""``_CLAIM`` that also takes each claimed run's lease and a new fencing token for the driver to come.

A run whose lease is live (another holder) is claimed without either, as a
claim followed by a failed ``try_acquire`` leaves it. The last column says
whether the run has no event yet: its driver then starts it without reading
its log. Should events have been committed in between (this statement's
snapshot is older than the token it bumped), the run's first append, which
refuses to create a run that has events, fails the drive as fenced.
"""


to_record = record_of
"""A control record from a row of ``COLUMNS``."""


def queue_key(schema: str, queue: str | None) -> int:
    """The key of a queue's advisory lock."""
    digest = hashlib.sha256(f"durable-queue:{schema}:{queue}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def claim_limited(
    db: Database,
    limits: QueueLimits,
    who: tuple[str, int, str],
    room: int,
    now: float,
    workflows: Collection[str] | None,
) -> list[ControlRecord]:
    """A claim under the queue's limits, in a transaction holding the queue's advisory lock."""
    owner, pid, host = who
    sql = db.sql

    def op(conn: Connection[Any], attempt: int) -> list[ControlRecord]:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (queue_key(db.schema, limits.name),))
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
                to_record(r)
                for r in conn.execute(
                    sql(
                        f"SELECT {COLUMNS} FROM {{s}}.control WHERE queue = %s AND state = 'enqueued' "
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

    return db.run(op)


def claim_unlimited(
    db: Database,
    cache: dict[tuple[bool, bool], str],
    queue: str,
    who: tuple[str, int, str],
    room: int,
    now: float,
    workflows: Collection[str] | None,
) -> list[ControlRecord]:
    """A claim of a queue without limits: one statement, with the runs' leases and tokens.

    With the world's locks on this database the statement also takes each
    run's lease and a new fencing token, handed to this process's next
    ``try_acquire`` and ``fence`` of the run (``Handover``); the lease is in
    the table and the token bumped before the claim returns, as if the
    driver had taken them. ``cache`` keeps the statement's text by variant.
    """
    owner, pid, host = who
    if room <= 0:
        return []
    book = db.handover
    lease = book.lease
    only = "AND workflow = ANY(%(workflows)b) " if workflows is not None else ""
    query = cache.get((lease is not None, workflows is not None))
    if query is None:
        text = (_CLAIM if lease is None else _CLAIM_LEASED).replace("{only}", only)
        query = cache[(lease is not None, workflows is not None)] = db.sql(text)
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

    def op(conn: Connection[Any], attempt: int) -> list[tuple[ControlRecord, int | None, bool]]:
        return [(to_record(r[:-2]), r[-2], bool(r[-1])) for r in conn.execute(query, params)]

    out = []
    for rec, token, empty in db.run(op):
        if token is not None:
            book.give(rec.run_id, holder, int(token), empty)
        out.append(rec)
    return out
