"""``PostgresMessages``: messages to runs in the ``messages`` table of a Postgres world's schema.

``consume`` runs in one database transaction with the log's own guarded
write (``PostgresLog.write_guarded``): the run's fencing token is locked and
checked, the ``message.received`` row is inserted and the message is marked
with its seq, all committed together or not at all. A second ``send`` with a
stored ``message_id`` (a resumed sender) stores nothing, because the id is
unique in the table. ``recv`` finds new messages by polling ``waiting``, as
on every world.

A connection lost mid-``consume`` is retried on a fresh one; when the lost
attempt committed, the retry finds the row it wrote and returns that
message instead of consuming another one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..log._protocol import Append, Row
from ..postgres._schema import GuardedLog
from ._protocol import Message

if TYPE_CHECKING:
    from psycopg import Connection


_COLUMNS = "id, run_id, topic, message_id, data, sent_at, consumed_seq"


def _topic(topic: str | None) -> str:
    """The condition on ``topic``: ``= %s`` or ``IS NULL``, both served by an index."""
    return "topic IS NULL AND %s::text IS NULL" if topic is None else "topic = %s"


def _message(row: Any) -> Message:
    return Message(
        int(row[0]), row[1], row[2], row[3], row[4], float(row[5]), None if row[6] is None else int(row[6])
    )


class PostgresMessages:
    """The message store of a ``PostgresLog`` (``messages`` table, created by migration ``0003_talk``).

    Args:
        log: The world's log; ``consume`` writes through its guarded append.
    """

    def __init__(self, log: GuardedLog):
        self._log = log
        self.db = log.db

    def send(self, run_id: str, topic: str | None, data: str, message_id: str, now: float) -> bool:
        query = self.db.sql(
            "INSERT INTO {s}.messages (run_id, topic, message_id, data, sent_at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (message_id) DO NOTHING RETURNING id"
        )

        def op(conn: Connection[Any], attempt: int) -> bool:
            return conn.execute(query, (run_id, topic, message_id, data, now)).fetchone() is not None

        return self.db.run(op, run_id=run_id)

    def waiting(self, run_id: str, topic: str | None) -> bool:
        query = self.db.sql(
            f"SELECT 1 FROM {{s}}.messages WHERE run_id = %s AND {_topic(topic)} "
            "AND consumed_seq IS NULL LIMIT 1"
        )

        def op(conn: Connection[Any], attempt: int) -> bool:
            return conn.execute(query, (run_id, topic)).fetchone() is not None

        return self.db.run(op, run_id=run_id)

    def consume(
        self, run_id: str, topic: str | None, token: int, build: Callable[[Message], Row]
    ) -> Message | None:
        log = self._log
        oldest = self.db.sql(
            f"SELECT {_COLUMNS} FROM {{s}}.messages WHERE run_id = %s AND {_topic(topic)} "
            "AND consumed_seq IS NULL ORDER BY id LIMIT 1 FOR UPDATE"
        )
        mark = self.db.sql("UPDATE {s}.messages SET consumed_seq = %s WHERE id = %s")

        def op(conn: Connection[Any], attempt: int) -> Message | None:
            if attempt:
                landed = self._landed(conn, run_id, topic, build)
                if landed is not None:
                    return landed
            with conn.transaction():
                got = conn.execute(oldest, (run_id, topic)).fetchone()
                if got is None:
                    return None
                msg = _message(got)
                row = build(msg)
                log.write_guarded(conn, Append(run_id, [row], token))  # raises before anything commits
                conn.execute(mark, (row[0], msg.id))
                return Message(msg.id, msg.run_id, msg.topic, msg.message_id, msg.data, msg.sent_at, row[0])

        return self.db.run(op, run_id=run_id)

    def _landed(
        self, conn: Connection[Any], run_id: str, topic: str | None, build: Callable[[Message], Row]
    ) -> Message | None:
        """The message a lost attempt consumed, when its commit landed (its row is stored as built)."""
        got = conn.execute(
            self.db.sql(
                f"SELECT {_COLUMNS} FROM {{s}}.messages WHERE run_id = %s AND {_topic(topic)} "
                "AND consumed_seq IS NOT NULL ORDER BY consumed_seq DESC LIMIT 1"
            ),
            (run_id, topic),
        ).fetchone()
        if got is None:
            return None
        msg = _message(got)
        row = build(msg)
        if msg.consumed_seq != row[0] or not self._log.stored(conn, run_id, [row]):
            return None
        return msg

    def messages(self, run_id: str, *, pending: bool = False) -> list[Message]:
        text = f"SELECT {_COLUMNS} FROM {{s}}.messages WHERE run_id = %s"
        if pending:
            text += " AND consumed_seq IS NULL"
        query = self.db.sql(text + " ORDER BY id")

        def op(conn: Connection[Any], attempt: int) -> list[Message]:
            return [_message(r) for r in conn.execute(query, (run_id,))]

        return self.db.run(op, run_id=run_id)

    def delete_run(self, run_id: str) -> None:
        query = self.db.sql("DELETE FROM {s}.messages WHERE run_id = %s")

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(query, (run_id,))

        self.db.run(op, run_id=run_id)
