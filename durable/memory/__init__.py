"""Long-term memory: namespaced items searched by their nearest embeddings (``world.memory``).

``MemoryStore`` keeps items in SQLite with the sqlite-vec extension, and
``PostgresMemory`` (a Postgres world's ``world.memory``) in the world's
schema with pgvector; an ``Embedder`` turns texts into vectors. Inside a run every operation is an
idempotent effect, so a resumed run replays what it read and wrote. The
names are re-exported by ``durable``.
"""

from __future__ import annotations

# The door: what the other parts of the package use (not public API).
from ._db import VecDb as VecDb
from ._embedders import Embedder, lexical_embedder
from ._items import MemoryItem, NewItem, SearchHit
from ._pg_rows import resealed as resealed
from ._postgres import PostgresMemory as PostgresMemory
from ._postgres import open_postgres_memory as open_postgres_memory
from ._sealed import recorded_check as recorded_check
from ._sealed import rekey_items as rekey_items
from ._sealed import stored_key_id as stored_key_id
from ._store import MemoryStore
from ._store import open_world_memory as open_world_memory

__all__ = ["Embedder", "MemoryItem", "MemoryStore", "NewItem", "SearchHit", "lexical_embedder"]
