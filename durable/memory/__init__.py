"""Long-term memory: namespaced items searched by their nearest embeddings (``world.memory``).

``MemoryStore`` keeps items in SQLite with the sqlite-vec extension; an
``Embedder`` turns texts into vectors. Inside a run every operation is an
idempotent effect, so a resumed run replays what it read and wrote. The
names are re-exported by ``durable``.
"""

from __future__ import annotations

from ._embedders import Embedder, lexical_embedder
from ._items import MemoryItem, NewItem, SearchHit
from ._store import MemoryStore

__all__ = ["Embedder", "MemoryItem", "MemoryStore", "NewItem", "SearchHit", "lexical_embedder"]
