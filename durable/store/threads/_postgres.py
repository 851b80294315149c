"""``PostgresThreads``: a world's threads in the ``threads`` table of its Postgres schema.

Every worker of the world reads and writes the same table, so a conversation
moves with its run to another machine. A write is one transaction; a key is
stored once per thread (a unique constraint), and ``replace`` is an upsert
that keeps the row's ``seq``. Keys sort bytewise (``COLLATE "C"``), as they
do in SQLite and in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._protocol import Order, ThreadItem, check_order

if TYPE_CHECKING:
    from psycopg import Connection

    from ..postgres._schema import Database


class PostgresThreads:
    """The thread store of a Postgres world (``threads`` table, created by migration ``0011_threads``).

    Args:
        db: The world's pool and schema.
    """

    def __init__(self, db: Database):
        self.db = db

    def close(self) -> None:
        """Nothing to release (the world closes the pool)."""

    def _rows(self, text: str, args: tuple[Any, ...]) -> list[Any]:
        query = self.db.sql(text)

        def op(conn: Connection[Any], attempt: int) -> list[Any]:
            return list(conn.execute(query, args))

        return self.db.run(op)

    def write(
        self,
        namespace: str,
        thread: str,
        items: Sequence[tuple[str, bytes]] = (),
        *,
        replace: bool = False,
        delete: Sequence[str] = (),
    ) -> None:
        conflict = "DO UPDATE SET value = excluded.value" if replace else "DO NOTHING"
        remove = self.db.sql("DELETE FROM {s}.threads WHERE namespace = %s AND thread = %s AND key = %s")
        insert = self.db.sql(
            "INSERT INTO {s}.threads (namespace, thread, key, value) VALUES (%s, %s, %s, %s) "
            f"ON CONFLICT (namespace, thread, key) {conflict}"
        )

        def op(conn: Connection[Any], attempt: int) -> None:
            # A retry after a lost connection writes the same keys again: what committed stays.
            with conn.transaction(), conn.cursor() as cur:
                if delete:
                    cur.executemany(remove, [(namespace, thread, k) for k in delete])
                if items:
                    cur.executemany(insert, [(namespace, thread, k, bytes(v)) for k, v in items])

        self.db.run(op)

    def get(self, namespace: str, thread: str, key: str) -> ThreadItem | None:
        rows = self._rows(
            "SELECT key, value, seq FROM {s}.threads WHERE namespace = %s AND thread = %s AND key = %s",
            (namespace, thread, key),
        )
        return ThreadItem(rows[0][0], bytes(rows[0][1]), int(rows[0][2])) if rows else None

    def items(
        self,
        namespace: str,
        thread: str,
        *,
        prefix: str = "",
        order: Order = "seq",
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[ThreadItem]:
        check_order(order)
        by = "seq" if order == "seq" else 'key COLLATE "C"'
        direction = "DESC" if newest_first else "ASC"
        rows = self._rows(
            "SELECT key, value, seq FROM {s}.threads WHERE namespace = %s AND thread = %s "
            f"AND left(key, %s) = %s ORDER BY {by} {direction} LIMIT %s",
            (namespace, thread, len(prefix), prefix, limit),
        )
        return [ThreadItem(k, bytes(v), int(s)) for k, v, s in rows]

    def delete_thread(self, namespace: str, thread: str) -> None:
        self._rows(
            "DELETE FROM {s}.threads WHERE namespace = %s AND thread = %s RETURNING seq", (namespace, thread)
        )

    def threads(self, namespace: str) -> list[str]:
        rows = self._rows(
            'SELECT DISTINCT thread COLLATE "C" AS t FROM {s}.threads WHERE namespace = %s ORDER BY t',
            (namespace,),
        )
        return [r[0] for r in rows]
