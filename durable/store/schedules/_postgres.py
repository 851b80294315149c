"""``PostgresSchedules``: schedules in the ``schedules`` table of a Postgres world's schema.

Every worker of the world reads the same table. ``advance`` is one guarded
``UPDATE`` (a compare-and-set on ``last_tick``), so of two workers that saw
the same last tick only one moves it; each tick's run id is deterministic
besides, so a tick is never started twice.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ._protocol import ScheduleRecord

if TYPE_CHECKING:
    from psycopg import Connection

    from ..postgres._schema import Database

_FIELDS = [f.name for f in dataclasses.fields(ScheduleRecord)]
_COLUMNS = ", ".join(_FIELDS)


def _record(row: Any) -> ScheduleRecord:
    (name, workflow, cron, every, input_, timezone, queue, catch_up, paused, last_tick, created, updated) = (
        row
    )
    return ScheduleRecord(
        name,
        workflow,
        cron=cron,
        every=None if every is None else float(every),
        input=input_,
        timezone=timezone,
        queue=queue,
        catch_up=catch_up,
        paused=bool(paused),
        last_tick=None if last_tick is None else float(last_tick),
        created_at=float(created),
        updated_at=float(updated),
    )


class PostgresSchedules:
    """The schedule store of a Postgres world (``schedules`` table, created by migration ``0003_talk``).

    Args:
        db: The world's pool and schema.
    """

    def __init__(self, db: Database):
        self.db = db

    def _rows(self, text: str, args: tuple[Any, ...]) -> list[ScheduleRecord]:
        query = self.db.sql(text)

        def op(conn: Connection[Any], attempt: int) -> list[ScheduleRecord]:
            return [_record(r) for r in conn.execute(query, args)]

        return self.db.run(op)

    def close(self) -> None:
        """Nothing to release (the world closes the pool)."""

    def upsert(self, record: ScheduleRecord) -> ScheduleRecord:
        values = dataclasses.astuple(record)
        keep = {"name", "paused", "last_tick", "created_at"}
        sets = ", ".join(f"{f} = excluded.{f}" for f in _FIELDS if f not in keep)
        rows = self._rows(
            f"INSERT INTO {{s}}.schedules ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(_FIELDS))}) "
            f"ON CONFLICT (name) DO UPDATE SET {sets} RETURNING {_COLUMNS}",
            values,
        )
        return rows[0]

    def get(self, name: str) -> ScheduleRecord | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.schedules WHERE name = %s", (name,))
        return rows[0] if rows else None

    def all(self) -> list[ScheduleRecord]:
        return self._rows(f"SELECT {_COLUMNS} FROM {{s}}.schedules ORDER BY name", ())

    def set_paused(self, name: str, paused: bool, now: float) -> ScheduleRecord | None:
        rows = self._rows(
            f"UPDATE {{s}}.schedules SET paused = %s, updated_at = %s WHERE name = %s RETURNING {_COLUMNS}",
            (paused, now, name),
        )
        return rows[0] if rows else None

    def delete(self, name: str) -> bool:
        query = self.db.sql("DELETE FROM {s}.schedules WHERE name = %s")

        def op(conn: Connection[Any], attempt: int) -> bool:
            return conn.execute(query, (name,)).rowcount > 0

        return self.db.run(op)

    def advance(self, name: str, expected: float | None, tick: float, now: float) -> bool:
        query = self.db.sql(
            "UPDATE {s}.schedules SET last_tick = %s, updated_at = %s "
            "WHERE name = %s AND last_tick IS NOT DISTINCT FROM %s::double precision"
        )

        def op(conn: Connection[Any], attempt: int) -> bool:
            if attempt:  # the lost attempt may have moved it: then it is ours
                row = conn.execute(
                    self.db.sql("SELECT last_tick, updated_at FROM {s}.schedules WHERE name = %s"), (name,)
                ).fetchone()
                if row is not None and row[0] == tick and row[1] == now:
                    return True
            return conn.execute(query, (tick, now, name, expected)).rowcount > 0

        return self.db.run(op)
