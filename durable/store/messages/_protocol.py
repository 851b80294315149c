"""Messages to runs: the ``MessageStore`` protocol, ``MemoryMessages``, and how a world finds its store.

A message waits in the store until the run's ``durable.recv`` consumes it.
Consuming it and appending the ``message.received`` event to the run's log
are one transaction (``consume``), so across kills a message is never lost
(it stays in the store until the event that records it commits) and never
handled twice (once the event commits, the message is marked with the
event's seq and no later ``recv`` sees it). That is why a message store
lives beside its log: ``SqliteMessages`` keeps its table in ``events.db``
and writes through the log's own connection; ``MemoryMessages`` holds one
lock around the log's append. A Postgres world does the same in one
database transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ..log._memory import MemoryLog
from ..log._protocol import Append, Row


@dataclass(frozen=True)
class Message:
    """One message as a store keeps it.

    Attributes:
        id: The store's order of arrival (increasing; ``recv`` takes the lowest first).
        run_id: The run it is addressed to.
        topic: Its topic (``None``: the default topic).
        message_id: Its identity: a second ``send`` with the same id stores nothing.
        data: The value as JSON text.
        sent_at: Unix time it was stored.
        consumed_seq: The seq of the ``message.received`` event that consumed it, or ``None``.
    """

    id: int
    run_id: str
    topic: str | None
    message_id: str
    data: str
    sent_at: float
    consumed_seq: int | None = None


class MessageStore(Protocol):
    """The protocol a world's message store implements (each method is one transaction)."""

    def send(self, run_id: str, topic: str | None, data: str, message_id: str, now: float) -> bool:
        """Store a message for ``run_id`` unless one with ``message_id`` is stored already.

        Args:
            run_id: The addressee (the caller checked that it exists).
            topic: The topic, ``None`` for the default one.
            data: The value as JSON text.
            message_id: The message's identity; a sender that may resend (a
                resumed run) passes the same id again.
            now: Unix time, recorded as ``sent_at``.

        Returns:
            ``True`` when the message was stored, ``False`` when its id was
            already there (consumed or not): nothing changes then.
        """

    def waiting(self, run_id: str, topic: str | None) -> bool:
        """Whether an unconsumed message of ``topic`` waits for ``run_id`` (a cheap read, no write)."""

    def consume(
        self,
        run_id: str,
        topic: str | None,
        token: int,
        build: Callable[[Message], Row],
    ) -> Message | None:
        """Consume the oldest unconsumed message of ``topic`` and append its event, atomically.

        In one transaction: pick the unconsumed message of ``(run_id, topic)``
        with the lowest ``id``; append the row ``build(message)`` to the
        run's log under the writer's fencing token (as ``EventLog.append``
        does, its seq following the run's last one); mark the message
        consumed with that row's seq. Either all of it commits or nothing.

        Args:
            run_id: The run whose driver consumes.
            topic: The topic (``None``: the default one only).
            token: The driver's fencing token.
            build: Makes the log row (``message.received``) from the message.

        Returns:
            The consumed message (``consumed_seq`` set), or ``None`` when no
            message waits; nothing is written then.

        Raises:
            FencedError: The token is stale or the row's seq is taken; nothing
                is written and the message stays unconsumed.
        """

    def messages(self, run_id: str, *, pending: bool = False) -> list[Message]:
        """The messages of a run in arrival order (``pending``: only the unconsumed ones)."""

    def delete_run(self, run_id: str) -> None:
        """Forget every message of a run (``gc`` of the run)."""


class MemoryMessages:
    """Messages held in this process beside a ``MemoryLog`` (``memory_world``).

    Args:
        log: The world's log; ``consume`` appends to it under this store's lock.
    """

    def __init__(self, log: MemoryLog):
        self._log = log
        self._mutex = threading.Lock()
        self._messages: list[Message] = []
        self._ids: set[str] = set()

    def send(self, run_id: str, topic: str | None, data: str, message_id: str, now: float) -> bool:
        with self._mutex:
            if message_id in self._ids:
                return False
            self._ids.add(message_id)
            self._messages.append(Message(len(self._messages) + 1, run_id, topic, message_id, data, now))
            return True

    def _oldest(self, run_id: str, topic: str | None) -> int | None:
        for i, m in enumerate(self._messages):
            if m.run_id == run_id and m.topic == topic and m.consumed_seq is None:
                return i
        return None

    def waiting(self, run_id: str, topic: str | None) -> bool:
        return self._oldest(run_id, topic) is not None

    def consume(
        self, run_id: str, topic: str | None, token: int, build: Callable[[Message], Row]
    ) -> Message | None:
        with self._mutex:
            i = self._oldest(run_id, topic)
            if i is None:
                return None
            msg = self._messages[i]
            row = build(msg)
            self._log.append([Append(run_id, [row], token)])  # raises before anything changes
            msg = self._messages[i] = replace(msg, consumed_seq=row[0])
            return msg

    def messages(self, run_id: str, *, pending: bool = False) -> list[Message]:
        return [
            m for m in self._messages if m.run_id == run_id and not (pending and m.consumed_seq is not None)
        ]

    def delete_run(self, run_id: str) -> None:
        with self._mutex:
            self._messages = [m for m in self._messages if m.run_id != run_id]
