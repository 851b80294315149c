"""Where a log's message store and outbox come from: beside the log, opened on first use.

A ``SqliteLog`` keeps them in tables of its own file, a ``MemoryLog`` in the
process (one per log, shared by every world around it); any other log
provides its own through ``message_store()`` and ``outbox_store()`` (the
Postgres log and the encrypted log do).
"""

from __future__ import annotations

import weakref

from ...errors import ConfigurationError
from ..log._memory import MemoryLog
from ..log._protocol import EventLog
from ..log._sqlite import SqliteLog
from ..outbox._protocol import MemoryOutbox, OutboxStore
from ..outbox._sqlite import SqliteOutbox
from ._protocol import MemoryMessages, MessageStore
from ._sqlite import SqliteMessages

_MEMORY_MESSAGES: weakref.WeakKeyDictionary[MemoryLog, MemoryMessages] = weakref.WeakKeyDictionary()


def messages_for(log: EventLog) -> MessageStore:
    """The message store that lives beside ``log`` (a world keeps the one it opened: ``open_messages``).

    A ``SqliteLog`` gets ``SqliteMessages`` (a table of its own file), a
    ``MemoryLog`` gets ``MemoryMessages``; another backend provides its own
    through a ``message_store()`` method on its log.

    Raises:
        ConfigurationError: The log has no message store.
    """
    store: MessageStore
    if isinstance(log, SqliteLog):
        store = SqliteMessages(log)
    elif isinstance(log, MemoryLog):
        shared = _MEMORY_MESSAGES.get(log)  # one store per log: every world around the log shares it
        if shared is None:
            shared = _MEMORY_MESSAGES[log] = MemoryMessages(log)
        store = shared
    else:
        factory = getattr(log, "message_store", None)
        if factory is None:
            raise ConfigurationError(
                f"this world's log ({type(log).__name__}) keeps no messages: messages, "
                "events and streams need a log that provides message_store(). Use "
                "local_world() or memory_world()."
            )
        store = factory()
    return store


_MEMORY_OUTBOX: weakref.WeakKeyDictionary[MemoryLog, MemoryOutbox] = weakref.WeakKeyDictionary()


def keeps_outbox(log: EventLog) -> bool:
    """Whether ``outbox_for`` finds an outbox for this log (without opening it)."""
    inner = getattr(log, "inner", None)
    if inner is not None and hasattr(log, "seal_append"):  # an encrypted log: its inner log's outbox
        return keeps_outbox(inner)
    return isinstance(log, SqliteLog | MemoryLog) or getattr(log, "outbox_store", None) is not None


def outbox_for(log: EventLog) -> OutboxStore:
    """The outbox that lives beside ``log`` (a world keeps the one it opened: ``open_outbox``).

    A ``SqliteLog`` gets ``SqliteOutbox`` (a table of its own file), a
    ``MemoryLog`` gets ``MemoryOutbox``; another backend provides its own
    through an ``outbox_store()`` method on its log.

    Raises:
        ConfigurationError: The log has no outbox.
    """
    store: OutboxStore
    if isinstance(log, SqliteLog):
        store = SqliteOutbox(log)
    elif isinstance(log, MemoryLog):
        kept = _MEMORY_OUTBOX.get(log)
        if kept is None:
            kept = _MEMORY_OUTBOX[log] = MemoryOutbox(log)
        store = kept
    else:
        factory = getattr(log, "outbox_store", None)
        if factory is None:
            raise ConfigurationError(
                f"this world's log ({type(log).__name__}) has no outbox: @tool(outbox=True) "
                "needs a log that provides outbox_store(). Use local_world() or memory_world()."
            )
        store = factory()
    return store
