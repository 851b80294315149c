"""The outbox: tool calls a run hands to dispatchers, committed with the run's log.

``OutboxStore`` is the protocol; ``MemoryOutbox``, ``SqliteOutbox`` and ``PostgresOutbox``
implement it.
"""

from __future__ import annotations
