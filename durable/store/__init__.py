"""Where durable state is stored: the event log protocol, its backends, locks and artifact stores.

A log backend is a class with the methods of ``EventLog``; ``MemoryLog``
(in the process), ``SqliteLog`` (one SQLite file) and ``PostgresLog`` (a
PostgreSQL schema, through ``durable.postgres_world``) are the ones that ship.
The runtime's queues, claims and cancellation requests live behind
``RunControl`` (``MemoryControl``, ``SqliteControl``, ``PostgresControl``). Messages to runs live
behind ``MessageStore`` (``MemoryMessages``, ``SqliteMessages``), beside the
log they commit with, and so does the outbox (``OutboxStore``:
``MemoryOutbox``, ``SqliteOutbox``). Schedules live behind ``ScheduleStore``
(``MemorySchedules``, ``SqliteSchedules`` in ``runtime.db``).
A world takes a log, a ``Locks`` (one driver per run) and an
``ArtifactStore`` (large payloads by content hash). Check a new backend with
``durable.store.conformance``, the suite every shipped log passes.

Example:
    >>> from durable.store import Append, MemoryLog
    >>> log = MemoryLog()
    >>> token = log.fence("r1")
    >>> log.append([Append("r1", [(1, "run.started", "{}")], token, created=("wf", None))])
    >>> log.read("r1")
    [(1, 'run.started', '{}')]
"""

from __future__ import annotations

import contextlib

from ._artifact_store import ArtifactStore, FileArtifacts, MemoryArtifacts
from ._control import ControlRecord, MemoryControl, QueueLimits, RunControl
from ._encrypted import EncryptedArtifacts, EncryptedLog
from ._locks import FileLocks, Locks, MemoryLocks
from ._memory_log import MemoryLog
from ._messages import MemoryMessages, Message, MessageStore
from ._outbox import MemoryOutbox, OutboxEntry, OutboxStore
from ._pg_artifacts import PostgresArtifacts
from ._pg_control import PostgresControl
from ._pg_locks import PostgresLocks
from ._pg_log import PostgresLog
from ._protocol import Append, EventLog, Row, RunInfo
from ._schedules import MemorySchedules, ScheduleRecord, ScheduleStore, SqliteSchedules
from ._sqlite import SqliteLog
from ._sqlite_control import SqliteControl
from ._sqlite_messages import SqliteMessages
from ._sqlite_outbox import SqliteOutbox
from ._talk_stores import messages_for, outbox_for

__all__ = [
    "Append",
    "ArtifactStore",
    "ControlRecord",
    "EncryptedArtifacts",
    "EncryptedLog",
    "EventLog",
    "FileArtifacts",
    "FileLocks",
    "Locks",
    "MemoryArtifacts",
    "MemoryControl",
    "MemoryLocks",
    "MemoryLog",
    "MemoryMessages",
    "MemoryOutbox",
    "MemorySchedules",
    "Message",
    "MessageStore",
    "OutboxEntry",
    "OutboxStore",
    "PostgresArtifacts",
    "PostgresControl",
    "PostgresLocks",
    "PostgresLog",
    "QueueLimits",
    "Row",
    "RunControl",
    "RunInfo",
    "ScheduleRecord",
    "ScheduleStore",
    "SqliteControl",
    "SqliteLog",
    "SqliteMessages",
    "SqliteOutbox",
    "SqliteSchedules",
    "messages_for",
    "outbox_for",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("durable.store."):
        with contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "durable.store"
