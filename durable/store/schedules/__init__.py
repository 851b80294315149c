"""Schedules: the ``ScheduleStore`` protocol and its backends.

``MemorySchedules``, ``SqliteSchedules`` (``runtime.db``) and ``PostgresSchedules``.
"""

from __future__ import annotations
