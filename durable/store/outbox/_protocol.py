"""The outbox: tool calls a run hands to dispatchers, committed with the run's log.

A ``@tool(outbox=True)`` called inside a run does not call its body: the run
records the call (its intent and the receipt that holds the ``OutboxRef``)
and an outbox entry in **one** transaction (``OutboxStore.enqueue``), and
goes on. A dispatcher in any worker then calls the body with the entry's
idempotency key, records each attempt, the result or the last error, and
moves an entry that ran out of attempts to the dead letter (state ``dead``).
``MemoryOutbox`` holds one lock around the log's append; ``SqliteOutbox``
keeps its table in ``events.db`` and writes through the log's connection.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..log._memory import MemoryLog
from ..log._protocol import Append

STATES = ("pending", "delivered", "dead")
"""The states of an outbox entry: waiting for (another) attempt, done, or given up on."""


@dataclass(frozen=True)
class OutboxEntry:
    """One outbox entry.

    Attributes:
        key: The call's idempotency key (``<run id>:<effect key>``), the entry's identity.
        run_id: The run that made the call.
        tool: The tool's recorded name (the dispatcher finds the body by it).
        input: The call's arguments as JSON text (an object by parameter name).
        state: ``pending``, ``delivered`` or ``dead``.
        attempts: Attempts started so far (an attempt cut by a crash counts).
        created_at: Unix time the run enqueued it.
        next_at: Unix time the next attempt is due (``pending`` only).
        owner: The dispatcher of the last attempt.
        result: The body's result as JSON text, once delivered.
        error: The last attempt's error (``type: message``), if it failed.
        updated_at: Unix time of the last change.
    """

    key: str
    run_id: str
    tool: str
    input: str
    state: str = "pending"
    attempts: int = 0
    created_at: float = 0.0
    next_at: float = 0.0
    owner: str | None = None
    result: str | None = None
    error: str | None = None
    updated_at: float = 0.0


class OutboxStore(Protocol):
    """The protocol a world's outbox implements (each method is one transaction)."""

    def enqueue(self, append: Append, entry: OutboxEntry) -> None:
        """Append the run's rows and store the entry, in one transaction.

        The rows follow ``EventLog.append``'s rules (token checked in the same
        transaction, explicit seqs). An entry whose key is stored already is
        kept as it is (the rows are still appended).

        Raises:
            FencedError: The token is stale or a seq is taken; nothing is written.
        """

    def due(self, now: float, limit: int = 100) -> list[OutboxEntry]:
        """Pending entries whose next attempt is due (``next_at <= now``), oldest first."""

    def get(self, key: str) -> OutboxEntry | None:
        """The entry, or ``None``."""

    def start_attempt(self, key: str, owner: str, now: float) -> OutboxEntry | None:
        """Count one more attempt of a pending entry, by ``owner``; ``None`` unless it is pending.

        The count is durable before the body is called, so attempts cut by
        a crash count against the retry policy too.
        """

    def deliver(self, key: str, result: str, now: float) -> None:
        """Record the body's result (JSON text): the entry is ``delivered``."""

    def fail(self, key: str, error: str, next_at: float | None, now: float) -> None:
        """Record a failed attempt: due again at ``next_at``, or ``dead`` when it is ``None``."""

    def retry_dead(self, key: str, now: float) -> OutboxEntry | None:
        """Put a dead entry back to ``pending``, due now, with its attempts counted from 0 again.

        Returns:
            The entry, or ``None`` when there is no dead entry with this key.
        """

    def entries(self, state: str | None = None, run_id: str | None = None) -> list[OutboxEntry]:
        """Entries, oldest first, optionally of one state or one run."""

    def delete_run(self, run_id: str) -> None:
        """Remove every entry of the run (``gc`` of a finished run)."""


class MemoryOutbox:
    """Outbox entries held in this process beside a ``MemoryLog`` (``memory_world``)."""

    def __init__(self, log: MemoryLog):
        self._log = log
        self._mutex = threading.Lock()
        self._entries: dict[str, OutboxEntry] = {}

    def enqueue(self, append: Append, entry: OutboxEntry) -> None:
        with self._mutex:
            self._log.append([append])
            self._entries.setdefault(entry.key, entry)

    def due(self, now: float, limit: int = 100) -> list[OutboxEntry]:
        rows = [e for e in self._entries.values() if e.state == "pending" and e.next_at <= now]
        return sorted(rows, key=lambda e: (e.next_at, e.created_at))[:limit]

    def get(self, key: str) -> OutboxEntry | None:
        return self._entries.get(key)

    def _change(self, key: str, only_if: str | None, **fields: Any) -> OutboxEntry | None:
        with self._mutex:
            old = self._entries.get(key)
            if old is None or (only_if is not None and old.state != only_if):
                return None
            new = self._entries[key] = replace(old, **fields)
            return new

    def start_attempt(self, key: str, owner: str, now: float) -> OutboxEntry | None:
        old = self._entries.get(key)
        if old is None:
            return None
        return self._change(key, "pending", attempts=old.attempts + 1, owner=owner, updated_at=now)

    def deliver(self, key: str, result: str, now: float) -> None:
        self._change(key, None, state="delivered", result=result, error=None, updated_at=now)

    def fail(self, key: str, error: str, next_at: float | None, now: float) -> None:
        if next_at is None:
            self._change(key, None, state="dead", error=error, updated_at=now)
        else:
            self._change(key, None, state="pending", error=error, next_at=next_at, updated_at=now)

    def retry_dead(self, key: str, now: float) -> OutboxEntry | None:
        return self._change(key, "dead", state="pending", attempts=0, next_at=now, updated_at=now)

    def entries(self, state: str | None = None, run_id: str | None = None) -> list[OutboxEntry]:
        rows = [
            e
            for e in self._entries.values()
            if (state is None or e.state == state) and (run_id is None or e.run_id == run_id)
        ]
        return sorted(rows, key=lambda e: e.created_at)

    def delete_run(self, run_id: str) -> None:
        with self._mutex:
            for key in [k for k, e in self._entries.items() if e.run_id == run_id]:
                del self._entries[key]
