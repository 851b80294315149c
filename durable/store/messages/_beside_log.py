"""Where a log's message store and outbox come from: beside the log, opened on first use.

A ``SqliteLog`` keeps them in tables of its own file, a ``MemoryLog`` in the
process (one per log, shared by every world around it); any other log
provides its own through ``message_store()`` and ``outbox_store()`` (the
Postgres log and the encrypted log do).
"""

from __future__ import annotations

import weakref
from typing import Any

from ...errors import ConfigurationError
from ..log._memory import MemoryLog
from ..log._protocol import EventLog
from ..log._sqlite import SqliteLog
from ..outbox._protocol import MemoryOutbox, OutboxStore
from ..outbox._sqlite import SqliteOutbox
from ._protocol import MemoryMessages, MessageStore
from ._sqlite import SqliteMessages

_MEMORY_MESSAGES: weakref.WeakKeyDictionary[MemoryLog, MemoryMessages] = weakref.WeakKeyDictionary()


def messages_for(log: EventLog, extensions: dict[str, Any]) -> MessageStore:
    """The message store that lives beside ``log``, opened on first use and kept in ``extensions``.

    A ``SqliteLog`` gets ``SqliteMessages`` (a table of its own file), a
    ``MemoryLog`` gets ``MemoryMessages``; another backend provides its own
    through a ``message_store()`` method on its log.

    Raises:
        ConfigurationError: The log has no message store.
    """
    store: MessageStore | None = extensions.get("messages")
    if store is not None:
        return store
    if isinstance(log, SqliteLog):
        store = SqliteMessages(log)
    elif isinstance(log, MemoryLog):
        store = _MEMORY_MESSAGES.get(log)  # one store per log: every world around the log shares it
        if store is None:
            store = _MEMORY_MESSAGES[log] = MemoryMessages(log)
    else:
        factory = getattr(log, "message_store", None)
        if factory is None:
            raise ConfigurationError(
                f"this world's log ({type(log).__name__}) keeps no messages: messages, "
                "events and streams need a log that provides message_store(). Use "
                "local_world() or memory_world()."
            )
        store = factory()
    extensions["messages"] = store
    return store


_MEMORY_OUTBOX: weakref.WeakKeyDictionary[MemoryLog, MemoryOutbox] = weakref.WeakKeyDictionary()


def keeps_outbox(log: EventLog, extensions: dict[str, Any]) -> bool:
    """Whether ``outbox_for`` finds an outbox for this log (without opening it)."""
    inner = getattr(log, "inner", None)
    if inner is not None and hasattr(log, "seal_append"):  # an encrypted log: its inner log's outbox
        return "outbox" in extensions or keeps_outbox(inner, {})
    return (
        "outbox" in extensions
        or isinstance(log, SqliteLog | MemoryLog)
        or getattr(log, "outbox_store", None) is not None
    )


def outbox_for(log: EventLog, extensions: dict[str, Any]) -> OutboxStore:
    """The outbox that lives beside ``log``, opened on first use and kept in ``extensions``.

    A ``SqliteLog`` gets ``SqliteOutbox`` (a table of its own file), a
    ``MemoryLog`` gets ``MemoryOutbox``; another backend provides its own
    through an ``outbox_store()`` method on its log.

    Raises:
        ConfigurationError: The log has no outbox.
    """
    store: OutboxStore | None = extensions.get("outbox")
    if store is not None:
        return store
    if isinstance(log, SqliteLog):
        store = SqliteOutbox(log)
    elif isinstance(log, MemoryLog):
        store = _MEMORY_OUTBOX.get(log)
        if store is None:
            store = _MEMORY_OUTBOX[log] = MemoryOutbox(log)
    else:
        factory = getattr(log, "outbox_store", None)
        if factory is None:
            raise ConfigurationError(
                f"this world's log ({type(log).__name__}) has no outbox: @tool(outbox=True) "
                "needs a log that provides outbox_store(). Use local_world() or memory_world()."
            )
        store = factory()
    extensions["outbox"] = store
    return store
