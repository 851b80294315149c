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
Conversations and graph checkpoints live behind ``ThreadStore``
(``MemoryThreads``, ``SqliteThreads`` in ``threads.db``, ``PostgresThreads``),
values sealed by ``EncryptedThreads`` in a world with a codec.

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

from .artifacts._postgres import PostgresArtifacts

# The door: what the other parts of the package use (not public API).
from .artifacts._postgres import PostgresDocuments as PostgresDocuments
from .artifacts._protocol import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from .artifacts._protocol import ArtifactStore, FileArtifacts, MemoryArtifacts
from .artifacts._protocol import hex_of as hex_of
from .artifacts._protocol import safe_location as safe_location
from .artifacts._protocol import sha256_of as sha256_of
from .control._memory import MemoryControl
from .control._postgres import PostgresControl
from .control._protocol import ControlRecord, QueueLimits, RunControl, WorkerRecord
from .control._protocol import worker_lock as worker_lock
from .control._sqlite import SqliteControl
from .encrypted._log import META_KEY as META_KEY
from .encrypted._log import PREFIX as PREFIX
from .encrypted._log import EncryptedArtifacts, EncryptedLog
from .encrypted._log import key_check as key_check
from .encrypted._log import open_manifest as open_manifest
from .encrypted._log import recorded_key_id as recorded_key_id
from .encrypted._log import refuse_plain_open as refuse_plain_open
from .encrypted._log import row_ad as row_ad
from .encrypted._log import verify_key_check as verify_key_check
from .encrypted._messages import EncryptedSchedules as EncryptedSchedules
from .encrypted._messages import message_ad as message_ad
from .encrypted._messages import open_text as open_text
from .encrypted._messages import outbox_ad as outbox_ad
from .encrypted._messages import rekey_talk as rekey_talk
from .encrypted._messages import schedule_ad as schedule_ad
from .encrypted._messages import seal_text as seal_text
from .encrypted._threads import EncryptedThreads
from .encrypted._threads import open_thread_value as open_thread_value
from .encrypted._threads import seal_thread_value as seal_thread_value
from .locks._postgres import PostgresLocks
from .locks._protocol import FileLocks, Locks, MemoryLocks
from .locks._protocol import hold as hold
from .log._memory import MemoryLog
from .log._postgres import PostgresLog
from .log._protocol import TERMINAL as TERMINAL
from .log._protocol import Append, EventLog, Row, RunInfo
from .log._protocol import append_one_by_one as append_one_by_one
from .log._protocol import row_times as row_times
from .log._sqlite import SqliteLog
from .messages._beside_log import keeps_outbox as keeps_outbox
from .messages._beside_log import messages_for, outbox_for
from .messages._protocol import MemoryMessages, Message, MessageStore
from .messages._sqlite import SqliteMessages
from .outbox._protocol import MemoryOutbox, OutboxEntry, OutboxStore
from .outbox._sqlite import SqliteOutbox
from .postgres._schema import REKEY_JOURNAL as REKEY_JOURNAL
from .postgres._schema import Database as Database
from .postgres._schema import check_schema_name as check_schema_name
from .postgres._schema import connect as connect
from .postgres._schema import describe_dsn as describe_dsn
from .postgres._schema import quote as quote
from .postgres._schema import recognise_world as recognise_world
from .postgres._schema import world_lock as world_lock
from .schedules._postgres import PostgresSchedules as PostgresSchedules
from .schedules._protocol import MemorySchedules, ScheduleRecord, ScheduleStore, SqliteSchedules
from .threads._beside_log import threads_for as threads_for
from .threads._postgres import PostgresThreads
from .threads._protocol import MemoryThreads, ThreadItem, ThreadStore
from .threads._sqlite import SqliteThreads

__all__ = [
    "Append",
    "ArtifactStore",
    "ControlRecord",
    "EncryptedArtifacts",
    "EncryptedLog",
    "EncryptedThreads",
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
    "MemoryThreads",
    "Message",
    "MessageStore",
    "OutboxEntry",
    "OutboxStore",
    "PostgresArtifacts",
    "PostgresControl",
    "PostgresLocks",
    "PostgresLog",
    "PostgresThreads",
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
    "SqliteThreads",
    "ThreadItem",
    "ThreadStore",
    "WorkerRecord",
    "messages_for",
    "outbox_for",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("durable.store."):
        with contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "durable.store"
