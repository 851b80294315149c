"""The runtime's control records: queues, claims, cancellation requests, deadlines, dedup ids.

``RunControl`` is the protocol (``_protocol``); ``MemoryControl`` (``_memory``),
``SqliteControl`` (``runtime.db``) and ``PostgresControl`` implement it.
"""

from __future__ import annotations
