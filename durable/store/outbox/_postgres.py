"""``PostgresOutbox``: outbox entries in the ``outbox`` table of a Postgres world's schema.

``enqueue`` runs in one database transaction with the log's guarded write
(``PostgresLog.write_guarded``): the run's fencing token is locked and
checked, the tool call's rows are inserted and the entry is stored, all
committed together or not at all. Dispatchers in any process take the
world's lease ``outbox:<key>`` (``PostgresLocks``) before an attempt, so one
dispatcher calls an entry at a time; a dead dispatcher's lease runs out and
the next pass of any worker re-drives the entry. ``start_attempt`` counts the
attempt only while the entry is still pending (one guarded ``UPDATE``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..log._protocol import Append
from ..postgres._schema import GuardedLog
from ._protocol import OutboxEntry

if TYPE_CHECKING:
    from psycopg import Connection


_FIELDS = [f.name for f in dataclasses.fields(OutboxEntry)]
_COLUMNS = ", ".join(_FIELDS)


def _entry(row: Any) -> OutboxEntry:
    (key, run_id, tool, input_, state, attempts, created_at, next_at, owner, result, error, updated_at) = row
    return OutboxEntry(
        key,
        run_id,
        tool,
        input_,
        state,
        int(attempts),
        float(created_at),
        float(next_at),
        owner,
        result,
        error,
        float(updated_at),
    )


class PostgresOutbox:
    """The outbox of a ``PostgresLog`` (``outbox`` table, created by migration ``0003_talk``).

    Args:
        log: The world's log; ``enqueue`` writes through its guarded append.
    """

    def __init__(self, log: GuardedLog):
        self._log = log
        self.db = log.db

    def _rows(self, text: str, args: tuple[Any, ...], run_id: str | None = None) -> list[OutboxEntry]:
        query = self.db.sql(text)

        def op(conn: Connection[Any], attempt: int) -> list[OutboxEntry]:
            return [_entry(r) for r in conn.execute(query, args)]

        return self.db.run(op, run_id=run_id)

    def enqueue(self, append: Append, entry: OutboxEntry) -> None:
        log = self._log
        insert = self.db.sql(
            f"INSERT INTO {{s}}.outbox ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(_FIELDS))}) "
            "ON CONFLICT (key) DO NOTHING"
        )
        values = dataclasses.astuple(entry)

        def op(conn: Connection[Any], attempt: int) -> None:
            if attempt and append.rows and log.stored(conn, append.run_id, append.rows):
                return  # the lost attempt committed rows and entry together
            with conn.transaction():
                log.write_guarded(conn, append)  # raises before anything commits
                conn.execute(insert, values)

        self.db.run(op, run_id=append.run_id)

    def due(self, now: float, limit: int = 100) -> list[OutboxEntry]:
        return self._rows(
            f"SELECT {_COLUMNS} FROM {{s}}.outbox WHERE state = 'pending' AND next_at <= %s "
            "ORDER BY next_at, created_at LIMIT %s",
            (now, limit),
        )

    def get(self, key: str) -> OutboxEntry | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.outbox WHERE key = %s", (key,))
        return rows[0] if rows else None

    def _update(self, key: str, where: str, sets: str, args: tuple[Any, ...]) -> OutboxEntry | None:
        rows = self._rows(
            f"UPDATE {{s}}.outbox SET {sets} WHERE key = %s {where} RETURNING {_COLUMNS}", (*args, key)
        )
        return rows[0] if rows else None

    def start_attempt(self, key: str, owner: str, now: float) -> OutboxEntry | None:
        return self._update(
            key, "AND state = 'pending'", "attempts = attempts + 1, owner = %s, updated_at = %s", (owner, now)
        )

    def deliver(self, key: str, result: str, now: float) -> None:
        self._update(
            key, "", "state = 'delivered', result = %s, error = NULL, updated_at = %s", (result, now)
        )

    def fail(self, key: str, error: str, next_at: float | None, now: float) -> None:
        if next_at is None:
            self._update(key, "", "state = 'dead', error = %s, updated_at = %s", (error, now))
        else:
            self._update(
                key,
                "",
                "state = 'pending', error = %s, next_at = %s, updated_at = %s",
                (error, next_at, now),
            )

    def retry_dead(self, key: str, now: float) -> OutboxEntry | None:
        return self._update(
            key,
            "AND state = 'dead'",
            "state = 'pending', attempts = 0, next_at = %s, updated_at = %s",
            (now, now),
        )

    def entries(self, state: str | None = None, run_id: str | None = None) -> list[OutboxEntry]:
        text = f"SELECT {_COLUMNS} FROM {{s}}.outbox WHERE true"
        args: list[Any] = []
        if state is not None:
            text += " AND state = %s"
            args.append(state)
        if run_id is not None:
            text += " AND run_id = %s"
            args.append(run_id)
        return self._rows(text + " ORDER BY created_at, key", tuple(args), run_id)

    def delete_run(self, run_id: str) -> None:
        query = self.db.sql("DELETE FROM {s}.outbox WHERE run_id = %s")

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(query, (run_id,))

        self.db.run(op, run_id=run_id)
