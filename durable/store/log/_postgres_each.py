"""``PostgresLog.append_each``: the appends of several runs in one transaction, fenced ones left out.

Each append is the token-guarded statement ``_ONE`` of ``_postgres``: it
writes nothing unless the writer's token is the run's current one, so a
stale append leaves the transaction usable and is reported in its place.
The statements are sent in one pipeline and committed together, so a group
of runs costs one round trip and one commit instead of one each.

A taken seq (a unique violation) aborts the whole transaction: nothing of it
committed, and the group is redone one append at a time, each in its own
transaction, so that only the appends that conflict are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..._clock import wall
from ._protocol import Append, Row, append_one_by_one, refused

if TYPE_CHECKING:
    from psycopg import Connection

    from ..postgres._schema import Database


class PostgresLog(Protocol):
    """What the grouped append needs of ``_postgres.PostgresLog``."""

    db: Database
    _one: Any

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None: ...

    def stored(self, conn: Connection[Any], run_id: str, rows: Sequence[Row]) -> bool: ...


class _Conflict(Exception):
    """A seq of the group was taken: its transaction rolled back, nothing of it committed."""


def append_each(log: PostgresLog, batch: Sequence[Append]) -> list[BaseException | None]:
    """Write every append of ``batch`` that is not fenced, in one transaction (see ``EventLog``)."""
    if not batch:
        return []
    try:
        return log.db.run(lambda conn, attempt: _grouped(log, conn, attempt, batch), run_id=batch[0].run_id)
    except _Conflict:
        return append_one_by_one(log, batch)


def _grouped(
    log: PostgresLog, conn: Connection[Any], attempt: int, batch: Sequence[Append]
) -> list[BaseException | None]:
    import psycopg

    if attempt:  # an earlier attempt may have committed: what it wrote is not redone
        return _each_after_a_lost_commit(log, conn, batch)
    now = wall()
    channel = log.db.channel
    out: list[BaseException | None] = []
    try:
        with conn.pipeline(), conn.transaction():  # BEGIN, the statements and COMMIT sent together
            cursors = [conn.execute(log._one, one_params(a, now, channel)) for a in batch]
        for a, cur in zip(batch, cursors, strict=True):
            row = cur.fetchone()
            if row is not None and int(row[0]) == len(a.rows):
                out.append(None)
            else:  # the guard matched nothing (it wrote nothing): another driver holds the run
                got = conn.execute(log.db.sql("SELECT token FROM {s}.runs WHERE run_id = %s"), (a.run_id,))
                token = got.fetchone()
                out.append(refused(a, int(token[0]) if token else 0))
    except psycopg.errors.UniqueViolation:
        raise _Conflict from None
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


def one_params(a: Append, now: float, channel: str) -> dict[str, Any]:
    """The parameters of ``_ONE`` for one append."""
    return {
        "run": a.run_id,
        "token": a.token,
        "seqs": [r[0] for r in a.rows],
        "types": [r[1] for r in a.rows],
        "datas": [r[2] for r in a.rows],
        "workflow": None if a.created is None else a.created[0],
        "parent": None if a.created is None else a.created[1],
        "status": a.status,
        "now": now,
        "chan": channel,
        "what": f"run:{a.run_id}",
    }
