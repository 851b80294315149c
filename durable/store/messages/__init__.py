"""Messages to runs: the ``MessageStore`` protocol and its backends.

``MemoryMessages``, ``SqliteMessages`` and ``PostgresMessages`` commit with the log beside
them; ``messages_for`` and ``outbox_for`` find a log's stores.
"""

from __future__ import annotations
