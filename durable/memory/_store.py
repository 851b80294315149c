"""The memory store: items with embeddings in SQLite, searched by nearest vectors.

An item is ``(namespace, key, text, metadata, embedding)``. Items live in an
ordinary table; their vectors live in a ``sqlite-vec`` ``vec0`` table under
the same rowid, and both change in one transaction. A search is one exact KNN
query whose candidate rows (namespace prefix and metadata filter) are chosen
inside the same query, so a filter never eats into the ``k`` hits.

Inside a run every operation is a durable effect (an idempotent ``@tool``
named ``memory_put``, ``memory_delete``, ``memory_search`` …): a write has an
intent before it and a receipt after it, and a read records what it saw, so
a replay sees what the original run saw even when the memory changed since.
Inside a ``@tool`` body the enclosing tool is the durable unit and the store
is used directly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..engine import CURRENT, EFFECT_KEY, make_decorator
from ..errors import MemoryStoreError
from ..security import Codec, open_folder, refuse_linked_database
from ._db import Driver, VecDb
from ._embedders import Embedder, EmbedFn
from ._filter import compile_filter
from ._items import MemoryItem, NewItem, RecordedRow, SearchHit, new_item
from ._sealed import ItemCipher, check_store_key
from ._tables import ItemRows, StoredRows, check_namespace

if TYPE_CHECKING:
    from ..engine import WorldCore

Metric = Literal["cosine", "l2"]
F = TypeVar("F", bound=Callable[..., Any])
MAX_K = 4096  # sqlite-vec's own ceiling on k


# Vectors reach the effect bodies beside their recorded input, not inside it: an
# embedder that differs in the last bit on resume must not make a put look like
# another call.
_VECTORS: ContextVar[list[list[float]] | None] = ContextVar("durable_memory_vectors", default=None)


def _pending_vectors(effect: str, method: str) -> list[list[float]]:
    vectors = _VECTORS.get()
    if vectors is None:
        raise MemoryStoreError(f"{effect} is called by MemoryStore.{method}, not directly.")
    return vectors


def _durable() -> bool:
    """Inside a run and not inside another effect's body: operations become effects."""
    return CURRENT.get() is not None and EFFECT_KEY.get() is None


def _tool(name: str) -> Callable[[F], F]:
    """An idempotent ``@tool``: a memory operation is safe to re-drive with its key."""
    decorate: Callable[[F], F] = make_decorator("tool", None, {"name": name, "idempotent": True})
    return decorate


class MemoryStore:
    """Long-term memory: namespaced items searched by the nearest embeddings.

    Get one with ``world.memory`` and set its embedder once with
    ``configure``. Every method is a coroutine. A store can also be opened on
    its own file with ``MemoryStore(path)``.

    Args:
        path: The SQLite file (created when missing), or ``None`` for a store in memory.
        driver: ``"auto"`` (the standard ``sqlite3`` module when it can load
            extensions, ``apsw`` otherwise), ``"sqlite3"`` or ``"apsw"``.
        clock: The clock of ``created_at`` and ``updated_at`` (default ``time.time``).
        codec: Encrypts every item's text and metadata at rest (a world's store
            gets the world's codec). Namespaces, keys and vectors stay in the
            clear; see the security page.

    Raises:
        MemoryStoreError: The ``memory`` extra is missing, or the file is not a memory store.
        KeyMismatchError: The store is encrypted and ``codec`` is missing or holds another key.
        CodecError: ``codec`` is given but the store holds items in the clear.

    Example:
        >>> import asyncio, durable
        >>> store = durable.MemoryStore().configure(durable.lexical_embedder(dim=64))
        >>> asyncio.run(store.put(("notes",), "tea", "Ada drinks green tea"))
        >>> hits = asyncio.run(store.search(("notes",), "green tea"))
        >>> hits[0].key, len(hits)
        ('tea', 1)

    Attributes:
        driver: The SQLite binding in use, ``"sqlite3"`` or ``"apsw"`` (``"psycopg"`` for the
            store of a Postgres world).
        path: The database file, or ``":memory:"`` (for the store of a Postgres world: its
            schema and server).
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        driver: Driver = "auto",
        clock: Callable[[], float] | None = None,
        codec: Codec | None = None,
    ):
        db = VecDb(path, driver=driver)
        try:
            rows = StoredRows(db, clock or time.time)
            check_store_key(db, codec)
        except BaseException:
            db.close()
            raise
        if codec is not None:
            rows.cipher = ItemCipher(codec, f"the memory store {db.path!r}")
        self._db = db
        self._attach(rows, driver=db.driver, path=db.path)

    def _attach(self, rows: ItemRows, *, driver: str, path: str) -> None:
        """Serve ``rows``: every backend's store is this class's logic over its own rows."""
        self._rows = rows
        self.driver = driver
        self.path = path
        self._embedder: Embedder | None = None

    # -- configuration ---------------------------------------------------------

    def configure(
        self,
        embedder: Embedder | EmbedFn | None = None,
        *,
        dim: int | None = None,
        metric: Metric | None = None,
    ) -> MemoryStore:
        """Set the embedder and, for a new store, its dimension and distance metric.

        A store keeps one dimension and one metric for its whole life; the
        first ``configure`` fixes them. Configure before running workflows:
        the embedder's name and dimension go into each run's manifest, so a
        run resumed under another embedder fails with ``CapabilityDriftError``.

        Args:
            embedder: An ``Embedder``, or a plain function (then ``dim`` is needed).
            dim: The vector size (taken from the embedder when it has one).
            metric: ``"cosine"`` (default for a new store) or ``"l2"``.

        Returns:
            The store itself.

        Raises:
            MemoryStoreError: The dimension or metric differs from the store's.
        """
        if embedder is not None and not isinstance(embedder, Embedder):
            if dim is None:
                raise MemoryStoreError(
                    "configure(embedder=fn) with a plain function needs dim=<vector size>, or "
                    "pass durable.Embedder(fn, dim=..., name=...)."
                )
            embedder = Embedder(embedder, dim=dim)
        if isinstance(embedder, Embedder):
            if dim is not None and dim != embedder.dim:
                raise MemoryStoreError(
                    f"configure got dim={dim} but embedder {embedder.name!r} has dim={embedder.dim}."
                )
            dim = embedder.dim
        if metric is not None and metric not in ("cosine", "l2"):
            raise MemoryStoreError(f"metric must be 'cosine' or 'l2', not {metric!r}.")
        if dim is None:
            if self._rows.dim is None:
                raise MemoryStoreError("configure needs an embedder or dim= for a new memory store.")
        else:
            self._rows.ensure_vectors(dim, metric or "cosine")
        if metric is not None and metric != self._rows.metric:
            raise MemoryStoreError(
                f"{self._rows.where} measures {self._rows.metric} distance, not {metric}; a store "
                f"keeps one metric. Use {self._rows.elsewhere} for another metric."
            )
        self._embedder = embedder
        return self

    @property
    def embedder(self) -> Embedder | None:
        """The configured embedder, or ``None``."""
        return self._embedder

    @property
    def dim(self) -> int | None:
        """The store's vector size, or ``None`` before it is configured."""
        return self._rows.current_dim()

    @property
    def metric(self) -> str | None:
        """``"cosine"`` or ``"l2"``, or ``None`` before the store is configured."""
        return self._rows.metric

    def manifest(self) -> dict[str, Any] | None:
        """What a run's manifest records about this store (``None`` when unconfigured)."""
        if self._rows.dim is None and self._embedder is None:
            return None
        return {
            "embedder": self._embedder.name if self._embedder is not None else None,
            "dim": self._rows.dim,
            "metric": self._rows.metric,
        }

    def close(self) -> None:
        """Close the database connection (the store of a Postgres world closes with its world)."""
        self._rows.close()

    def __repr__(self) -> str:
        return f"<durable MemoryStore {self.path!r} dim={self.dim} metric={self.metric!r}>"

    # -- embedding -------------------------------------------------------------

    def _need_dim(self) -> int:
        dim = self._rows.current_dim()
        if dim is None:
            raise MemoryStoreError(
                "the memory store has no embedder yet: call "
                "world.memory.configure(durable.lexical_embedder()) or "
                "configure(my_embedder) first."
            )
        return dim

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if self._embedder is None:
            raise MemoryStoreError(
                "the memory store has no embedder to embed text with: call "
                "world.memory.configure(embedder) first, or pass embedding= yourself."
            )
        return await self._embedder.embed(texts)

    # -- writes ----------------------------------------------------------------

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        embedding: Sequence[float] | None = None,
    ) -> None:
        """Store an item, replacing the item with the same namespace and key.

        Args:
            namespace: A tuple of strings, e.g. ``("users", "u1", "facts")``.
            key: The item's key inside the namespace.
            text: The text to store (and embed, unless ``embedding`` is given).
            metadata: JSON metadata that search filters match on.
            embedding: A vector to store instead of embedding ``text``.

        Raises:
            MemoryStoreError: A bad namespace or metadata, or a vector of the wrong size.
        """
        item: dict[str, Any] = {
            "namespace": check_namespace(namespace),
            "key": key,
            "text": text,
            "metadata": metadata or {},
        }
        if embedding is not None:
            item["embedding"] = embedding
        await self.put_many([item])

    async def put_many(self, items: Iterable[NewItem | Mapping[str, Any]]) -> int:
        """Store many items in one transaction (all of them or none).

        Args:
            items: ``NewItem``s or dicts with ``namespace``, ``key``, ``text`` and
                optionally ``metadata`` and ``embedding``.

        Returns:
            How many items were written.
        """
        new = [new_item(i) for i in items]
        if not new:
            return 0
        dim = self._need_dim()
        seen: set[tuple[tuple[str, ...], str]] = set()
        for n in new:
            check_namespace(n.namespace)
            if (n.namespace, n.key) in seen:
                raise MemoryStoreError(
                    f"put_many got the key {n.key!r} twice in namespace {n.namespace!r}; each "
                    "item of one batch needs its own key."
                )
            seen.add((n.namespace, n.key))
        missing = [i for i, n in enumerate(new) if n.embedding is None]
        vectors: list[list[float]] = [n.embedding or [] for n in new]
        if missing:
            got = await self._embed([new[i].text for i in missing])
            for i, v in zip(missing, got, strict=True):
                vectors[i] = v
        for n, v in zip(new, vectors, strict=True):
            if len(v) != dim:
                raise MemoryStoreError(
                    f"the embedding of {n.key!r} in {n.namespace!r} has {len(v)} dimensions; "
                    f"{self._rows.where} holds {dim}-dimension vectors. Use the embedder the store "
                    f"was made with, or {self._rows.elsewhere}."
                )
        if not _durable():
            return self._rows.write(new, vectors)
        rows = [RecordedRow(namespace=n.namespace, key=n.key, text=n.text, metadata=n.metadata) for n in new]
        token = _VECTORS.set(vectors)
        try:
            return int(await self._put_effect(rows))
        finally:
            _VECTORS.reset(token)

    @_tool("memory_put")
    async def _put_effect(self, rows: list[RecordedRow]) -> int:
        return self._rows.write(rows, _pending_vectors("memory_put", "put_many"))

    async def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Delete an item and its vector together.

        Returns:
            Whether an item was there to delete.
        """
        ns = check_namespace(namespace)
        if not _durable():
            return self._rows.delete(ns, key)
        return bool(await self._delete_effect(ns, key))

    @_tool("memory_delete")
    async def _delete_effect(self, namespace: tuple[str, ...], key: str) -> bool:
        return self._rows.delete(namespace, key)

    # -- reads -----------------------------------------------------------------

    async def get(self, namespace: Sequence[str], key: str) -> MemoryItem | None:
        """The item with this namespace and key, or ``None``."""
        ns = check_namespace(namespace)
        if not _durable():
            return self._get(ns, key)
        got: MemoryItem | None = await self._get_effect(ns, key)
        return got

    def _get(self, namespace: tuple[str, ...], key: str) -> MemoryItem | None:
        row = self._rows.get(namespace, key)
        if row is None:
            return None
        text, metadata, created, updated = row
        return MemoryItem(
            namespace=namespace,
            key=key,
            text=text,
            metadata=json.loads(metadata),
            created_at=created,
            updated_at=updated,
        )

    @_tool("memory_get")
    async def _get_effect(self, namespace: tuple[str, ...], key: str) -> MemoryItem | None:
        return self._get(namespace, key)

    async def search(
        self,
        namespace: Sequence[str],
        query: str | Sequence[float],
        *,
        k: int = 5,
        filter: Mapping[str, Any] | None = None,
    ) -> list[SearchHit]:
        """The ``k`` items nearest to ``query`` under a namespace prefix, nearest first.

        The search is exact (every candidate is measured). The filter chooses
        the candidates inside the same query, so a filtered search returns
        ``k`` hits whenever ``k`` items match it.

        Args:
            namespace: A namespace prefix; ``()`` searches the whole store.
            query: A text (embedded with the store's embedder) or a vector.
            k: How many hits at most (1 to 4096).
            filter: Metadata conditions, e.g. ``{"kind": "fact", "score": {"$gte": 0.5}}``;
                the operators are ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``
                and ``$in``.

        Returns:
            The hits, nearest first.

        Raises:
            MemoryStoreError: A bad filter, ``k`` or namespace, or a vector of the wrong size.
        """
        ns = check_namespace(namespace, allow_empty=True)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise MemoryStoreError(f"k must be an int from 1 to {MAX_K}, not {k!r}.")
        flt = dict(filter or {})
        compile_filter(flt)  # bad filters fail here, before anything is recorded
        dim = self._need_dim()
        if isinstance(query, str):
            text: str | None = query
            vector = (await self._embed([query]))[0]
        else:
            text, vector = None, [float(x) for x in query]
        if len(vector) != dim:
            raise MemoryStoreError(
                f"the query vector has {len(vector)} dimensions; {self._rows.where} holds "
                f"{dim}-dimension vectors. Search with the store's embedder."
            )
        self._rows.pack(vector, "the query vector")  # refuse a bad query before it is recorded
        if not _durable():
            return self._search(ns, vector, k, flt)
        token = _VECTORS.set([vector])
        try:
            hits: list[SearchHit] = await self._search_effect(ns, text, k, flt)
        finally:
            _VECTORS.reset(token)
        return hits

    def _search(
        self, namespace: tuple[str, ...], vector: list[float], k: int, filter: dict[str, Any]
    ) -> list[SearchHit]:
        return [
            SearchHit(
                namespace=tuple(json.loads(ns)),
                key=key,
                text=text,
                metadata=json.loads(meta),
                distance=dist,
            )
            for ns, key, text, meta, dist in self._rows.knn(namespace, vector, k, filter)
        ]

    @_tool("memory_search")
    async def _search_effect(
        self, namespace: tuple[str, ...], query: str | None, k: int, filter: dict[str, Any]
    ) -> list[SearchHit]:
        return self._search(namespace, _pending_vectors("memory_search", "search")[0], k, filter)

    async def namespaces(self, prefix: Sequence[str] | None = None) -> list[tuple[str, ...]]:
        """The namespaces that hold items, under ``prefix`` when given, sorted."""
        ns = check_namespace(() if prefix is None else prefix, allow_empty=True)
        if not _durable():
            return self._namespaces(ns)
        got: list[tuple[str, ...]] = await self._namespaces_effect(ns)
        return got

    def _namespaces(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        return sorted(tuple(json.loads(t)) for t in self._rows.namespaces(prefix))

    @_tool("memory_namespaces")
    async def _namespaces_effect(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        return self._namespaces(prefix)

    async def count(self, namespace: Sequence[str] | None = None) -> int:
        """How many items the store holds, under a namespace prefix when given."""
        ns = check_namespace(() if namespace is None else namespace, allow_empty=True)
        if not _durable():
            return self._rows.count(ns)
        return int(await self._count_effect(ns))

    @_tool("memory_count")
    async def _count_effect(self, namespace: tuple[str, ...]) -> int:
        return self._rows.count(namespace)


FOLDER = "memory"
"""The folder of a data directory that holds the memory store (``memory.db``)."""


def open_world_memory(world: WorldCore) -> MemoryStore:
    """The world's memory store, opened on first use and kept with the world."""
    found = world.memory_store
    if isinstance(found, MemoryStore):
        return found
    path: Path | None = None
    if world.data_dir is not None:
        root = Path(world.data_dir)
        fd = open_folder(root, (FOLDER,), create=True)  # a link at memory/ is refused, not followed
        assert fd is not None
        os.close(fd)
        refuse_linked_database(root, (FOLDER,), "memory.db")
        path = root / FOLDER / "memory.db"
    store = MemoryStore(path, clock=world.clock, codec=getattr(world, "codec", None))
    world.memory_store = store
    return store
