"""The event log: the ``EventLog`` protocol and its backends.

``MemoryLog`` (in the process), ``SqliteLog`` (one SQLite file in WAL mode) and ``PostgresLog``.
"""

from __future__ import annotations
