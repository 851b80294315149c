"""Where a log's thread store lives: beside the log, opened on first use (``world.threads``)."""

from __future__ import annotations

import weakref

from ...errors import ConfigurationError
from ..encrypted._log import EncryptedLog
from ..encrypted._threads import EncryptedThreads
from ..log._memory import MemoryLog
from ..log._postgres import PostgresLog
from ..log._protocol import EventLog
from ..log._sqlite import SqliteLog
from ._postgres import PostgresThreads
from ._protocol import MemoryThreads, ThreadStore
from ._sqlite import SqliteThreads

_MEMORY: weakref.WeakKeyDictionary[MemoryLog, MemoryThreads] = weakref.WeakKeyDictionary()


def threads_for(log: EventLog) -> ThreadStore:
    """The thread store that lives beside ``log`` (a world keeps the one it opened).

    Raises:
        ConfigurationError: The log keeps no threads (a backend of its own without
            ``thread_store()``).
    """
    if isinstance(log, EncryptedLog):
        return EncryptedThreads(threads_for(log.inner), log.codec)
    if isinstance(log, SqliteLog):
        return SqliteThreads(log.path.with_name("threads.db"))
    if isinstance(log, PostgresLog):
        return PostgresThreads(log.db)
    if isinstance(log, MemoryLog):
        shared = _MEMORY.get(log)  # one store per log: every world around the log shares it
        if shared is None:
            shared = _MEMORY[log] = MemoryThreads()
        return shared
    factory = getattr(log, "thread_store", None)
    if factory is not None:
        store: ThreadStore = factory()
        return store
    inner = getattr(log, "inner", None)  # a wrapper of another log (a test's crashing log)
    if inner is not None and hasattr(inner, "append"):
        return threads_for(inner)
    raise ConfigurationError(
        f"this world's log ({type(log).__name__}) keeps no threads: conversation sessions need a "
        "log that provides thread_store(). Use local_world(), postgres_world() or memory_world()."
    )
