"""``PostgresLog.append_each``: the appends of several runs in one transaction, fenced ones left out.

The group is one autocommitted statement, ``_MANY``: the appends' rows
and summaries as arrays, each run's part written only when the writer's
token is the run's current one. The tokens are locked ``FOR UPDATE`` in
the order of the run ids, so two groups that share runs cannot deadlock.
A group costs one round trip, one statement and one commit, however many
runs it holds.

A stale append writes nothing and is reported in its place. A taken seq
(a unique violation) fails the whole group: nothing of it committed, and
the group is redone one append at a time, each in its own transaction, so
that only the appends that conflict are refused. So is a group that holds
two appends of one run, which the engine never gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..._clock import wall
from ._protocol import Append, Row, append_one_by_one, refused

if TYPE_CHECKING:
    from psycopg import Connection

    from ..postgres._schema import Database


_MANY = (
    "WITH a AS MATERIALIZED (SELECT a.*, (SELECT token FROM {s}.runs r WHERE r.run_id = a.run_id FOR UPDATE) "
    "AS current FROM unnest(%(runs)b::text[], %(tokens)b::bigint[], %(workflows)b::text[], "
    "%(parents)b::text[], %(statuses)b::text[], %(states)b::text[], %(holders)b::text[], %(codes)b::text[]) "
    "AS a(run_id, token, workflow, parent, status, state, holder, code)), "
    "g AS MATERIALIZED (SELECT run_id, workflow, parent, status, state, holder, code, "
    "COALESCE(current, 0) AS current, "
    "COALESCE(current, 0) = token AND (workflow IS NULL "
    "OR NOT EXISTS (SELECT 1 FROM {s}.events e WHERE e.run_id = a.run_id)) AS ok FROM a), "
    "ins AS (INSERT INTO {s}.events (run_id, seq, type, data) SELECT r.run_id, r.seq, r.type, r.data "
    "FROM unnest(%(row_runs)b::text[], %(seqs)b::bigint[], %(types)b::text[], %(datas)b::text[]) "
    "AS r(run_id, seq, type, data) JOIN g ON g.run_id = r.run_id WHERE g.ok RETURNING run_id), "
    "made AS (INSERT INTO {s}.runs (run_id, workflow, status, parent_run_id, created_at, updated_at, token, "
    "code) SELECT run_id, workflow, COALESCE(status, 'running'), parent, %(now)s, %(now)s, 0, code FROM g "
    "WHERE g.ok AND g.workflow IS NOT NULL "
    "ON CONFLICT (run_id) DO UPDATE SET workflow = excluded.workflow, status = excluded.status, "
    "parent_run_id = excluded.parent_run_id, created_at = excluded.created_at, "
    "updated_at = excluded.updated_at, code = excluded.code RETURNING 1), "
    "upd AS (UPDATE {s}.runs r SET status = g.status, updated_at = %(now)s FROM g "
    "WHERE r.run_id = g.run_id AND g.ok AND g.workflow IS NULL AND g.status IS NOT NULL RETURNING 1), "
    "ctl AS (UPDATE {s}.control c SET state = g.state, cancel_reason = NULL, resume = NULL, drives = 0, "
    "blocked = NULL FROM g WHERE c.run_id = g.run_id AND g.ok AND g.state IS NOT NULL "
    "AND c.state = 'claimed' RETURNING c.run_id, c.queue), "
    "gone AS (DELETE FROM {s}.leases l USING g WHERE l.name = 'run:' || g.run_id AND l.holder = g.holder "
    "AND g.ok AND g.state IS NOT NULL) "
    "SELECT g.run_id, g.ok, g.current, (SELECT count(*) FROM ins WHERE ins.run_id = g.run_id), "
    "EXISTS (SELECT 1 FROM ctl WHERE ctl.run_id = g.run_id), "
    "CASE WHEN g.ok AND g.status IS NOT NULL THEN pg_notify(%(chan)s, 'run:' || g.run_id) END, "
    "(SELECT count(pg_notify(%(chan)s, 'free:' || q.queue)) FROM (SELECT DISTINCT queue FROM ctl "
    "WHERE queue IS NOT NULL) AS q) FROM g"
)
"""One statement: the appends of several runs, each run's part guarded by its writer's token.

The arrays come sorted by run id, so the tokens are locked in that order.
Like ``_ONE``, an append that creates its run writes nothing when the run
has events already, a run's end is announced (``run:<run_id>``) at the
commit, and it ends the run's claimed control record and deletes its lease
held here (``holder``), announcing each queue with a slot freed. Each run
answers one row: whether its guard held, its current token, how many of its
rows went in and whether its record was ended.
"""


_ENDS = {"completed": "done", "failed": "done", "interrupted": "done", "cancelled": "cancelled"}
"""A run's end status -> the state its driver gives its control record (``Driver._drive``)."""


def end_state(status: str | None) -> str | None:
    """The state a run's control record takes at the log's ``status``; ``None``: not an end."""
    return None if status is None else _ENDS.get(status)


def ended(db: Database, runs: Sequence[tuple[str, str, bool]], leases: dict[str, str]) -> None:
    """After the commit of runs' ends ``(run_id, state, record ended)``: tell the book what went with them.

    The leases ``leases`` (name -> holder) of those runs were deleted, and
    each record ended is left out of the ``finish_many`` that follows.
    """
    book = db.handover
    for run_id, state, record in runs:
        if record:
            book.finished(run_id, state)
    if leases:
        book.ended(leases)


class PostgresLog(Protocol):
    """What the grouped append needs of ``_postgres.PostgresLog``."""

    db: Database
    _many: Any

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None: ...

    def stored(self, conn: Connection[Any], run_id: str, rows: Sequence[Row]) -> bool: ...


class _Conflict(Exception):
    """A seq of the group was taken: its transaction rolled back, nothing of it committed."""


def append_each(log: PostgresLog, batch: Sequence[Append]) -> list[BaseException | None]:
    """Write every append of ``batch`` that is not fenced, in one transaction (see ``EventLog``)."""
    if not batch:
        return []
    if len({a.run_id for a in batch}) != len(batch):  # one append per run is the rule; keep order
        return append_one_by_one(log, batch)
    try:
        return log.db.run(lambda conn, attempt: _grouped(log, conn, attempt, batch), run_id=batch[0].run_id)
    except _Conflict:
        return append_one_by_one(log, batch)


def _grouped(
    log: PostgresLog, conn: Connection[Any], attempt: int, batch: Sequence[Append]
) -> list[BaseException | None]:
    """The group as ``_MANY``: one autocommitted statement; each append's outcome in its place."""
    import psycopg

    if attempt:  # an earlier attempt may have committed: what it wrote is not redone
        return _each_after_a_lost_commit(log, conn, batch)
    ordered = sorted(batch, key=lambda a: a.run_id)
    states = [end_state(a.status) for a in ordered]
    names = [f"run:{a.run_id}" for a, st in zip(ordered, states, strict=True) if st is not None]
    leases = log.db.handover.holders(names) if names else {}
    params = {
        "runs": [a.run_id for a in ordered],
        "tokens": [a.token for a in ordered],
        "workflows": [None if a.created is None else a.created[0] for a in ordered],
        "parents": [None if a.created is None else a.created[1] for a in ordered],
        "statuses": [a.status for a in ordered],
        "states": states,
        "holders": [leases.get(f"run:{a.run_id}") for a in ordered],
        "codes": [a.code for a in ordered],
        "row_runs": [a.run_id for a in ordered for _ in a.rows],
        "seqs": [r[0] for a in ordered for r in a.rows],
        "types": [r[1] for a in ordered for r in a.rows],
        "datas": [r[2] for a in ordered for r in a.rows],
        "now": wall(),
        "chan": log.db.channel,
    }
    try:
        answers = {row[0]: row[1:5] for row in conn.execute(log._many, params)}
    except psycopg.errors.UniqueViolation:
        raise _Conflict from None
    out: list[BaseException | None] = []
    ends: list[tuple[str, str, bool]] = []
    for a, state in zip(ordered, states, strict=True):
        ok, _, wrote, record = answers[a.run_id]
        if ok and int(wrote) == len(a.rows) and state is not None:
            ends.append((a.run_id, state, bool(record)))
        elif not ok:
            leases.pop(f"run:{a.run_id}", None)  # a fenced append deleted nothing
    ended(log.db, ends, leases)
    for a in batch:
        ok, current, wrote, _ = answers[a.run_id]
        out.append(None if ok and int(wrote) == len(a.rows) else refused(a, int(current)))
    return out


def _each_after_a_lost_commit(
    log: PostgresLog, conn: Connection[Any], batch: Sequence[Append]
) -> list[BaseException | None]:
    """After a lost connection: an append whose rows are stored as given landed; the rest go one by one."""
    out: list[BaseException | None] = []
    for a in batch:
        if a.rows and log.stored(conn, a.run_id, a.rows):
            out.append(None)
        else:
            out.extend(append_one_by_one(log, [a]))
    return out
