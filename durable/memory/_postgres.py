"""``world.memory`` of a Postgres world: the memory store's logic over rows in the world's schema.

Every worker that opens the world shares the one memory: items are rows of
its schema (``_pg_rows``), searched with pgvector. Everything else, the
checks, the embedder, the effects a run records, is ``MemoryStore``'s own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..security import Codec
from ._pg_rows import PostgresRows
from ._sealed import ItemCipher
from ._store import MemoryStore

if TYPE_CHECKING:
    from ..engine import WorldCore
    from ..store import Database


class PostgresMemory(MemoryStore):
    """The memory store of a Postgres world, on pgvector (get it with ``world.memory``).

    The same methods, filters and effects as ``MemoryStore``; its items live
    in the world's schema, so every process that opens the world reads and
    writes the same memory.

    Args:
        db: The world's database (its pool and schema).
        clock: The clock of ``created_at`` and ``updated_at`` (default ``time.time``).
        codec: Encrypts every item's text and metadata at rest (the world's codec).

    Raises:
        MemoryStoreError: The server lacks the ``vector`` extension (pgvector), or the
            role may not create it; the message says how to get it.
        CodecError: ``codec`` is given but the store holds items in the clear.
    """

    def __init__(self, db: Database, *, clock: Callable[[], float] | None = None, codec: Codec | None = None):
        where = f"the memory store of the PostgreSQL schema {db.schema!r} at {db.where}"
        cipher = None if codec is None else ItemCipher(codec, where)
        rows = PostgresRows(db, clock or time.time, cipher)
        self._attach(rows, driver="psycopg", path=f"PostgreSQL schema {db.schema!r} at {db.where}")


def open_postgres_memory(world: WorldCore, db: Database) -> MemoryStore:
    """The Postgres world's memory store, opened on first use and kept with the world."""
    found = world.memory_store
    if isinstance(found, MemoryStore):
        return found
    store = PostgresMemory(db, clock=world.clock, codec=getattr(world, "codec", None))
    world.memory_store = store
    return store
