"""One driver per run: the ``Locks`` protocol and its backends.

``MemoryLocks`` (in the process), ``FileLocks`` (OS file locks) and ``PostgresLocks`` (lease
rows with heartbeats).
"""

from __future__ import annotations
