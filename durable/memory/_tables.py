"""The memory store's tables and the SQL that reads and writes them.

``items`` holds one row per (namespace, key); ``vectors``, a ``sqlite-vec``
``vec0`` table, holds its embedding under the same rowid, and every write
changes both in one transaction. ``settings`` remembers the dimension and
metric the vectors table was made with. Namespaces are stored as compact
ASCII JSON arrays, so a namespace prefix is a range of the ``(ns, key)``
index.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

from ..errors import MemoryStoreError
from ._db import VecDb
from ._filter import compile_filter
from ._sealed import ItemCipher


class Row(Protocol):
    """An item to write: what ``NewItem`` and a recorded put both have."""

    @property
    def namespace(self) -> tuple[str, ...]: ...
    @property
    def key(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


class ItemRows(Protocol):
    """What the memory store asks of its database: SQLite's ``StoredRows`` or PostgreSQL's ``PostgresRows``.

    Attributes:
        where: How messages name the store (``the memory store '…/memory.db'``).
        elsewhere: Where to keep a store of another dimension or metric.
        dim: The vector size, ``None`` before the store is configured.
        metric: ``"cosine"`` or ``"l2"``, ``None`` before the store is configured.
    """

    where: str
    elsewhere: str
    dim: int | None
    metric: str | None

    def current_dim(self) -> int | None:
        """The dimension, re-read when another process may have configured the store since."""
        ...

    def ensure_vectors(self, dim: int, metric: str) -> None:
        """Fix the dimension and metric of a new store, or check those of the store."""
        ...

    def pack(self, vector: Sequence[float], what: str) -> bytes:
        """Check a vector (``check_vector``); its float32 bytes."""
        ...

    def write(self, rows: Sequence[Row], vectors: list[list[float]]) -> int:
        """Insert or replace ``rows`` and their vectors in one transaction."""
        ...

    def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        """Delete one item and its vector together; whether it existed."""
        ...

    def get(self, namespace: tuple[str, ...], key: str) -> tuple[str, str, float, float] | None:
        """``(text, metadata JSON, created_at, updated_at)`` of one item, or ``None``."""
        ...

    def knn(
        self, prefix: tuple[str, ...], vector: list[float], k: int, filter: dict[str, Any]
    ) -> list[tuple[str, str, str, str, float]]:
        """The ``k`` nearest items under ``prefix`` that ``filter`` matches, nearest first."""
        ...

    def namespaces(self, prefix: tuple[str, ...]) -> list[str]:
        """The stored namespace texts under ``prefix``."""
        ...

    def count(self, prefix: tuple[str, ...]) -> int:
        """How many items are under ``prefix``."""
        ...

    def close(self) -> None:
        """Let the database go (a second call does nothing)."""
        ...


SCHEMA_VERSION = 1
_KEY_CHUNK = 500  # stays far below SQLite's limit of bound parameters


@lru_cache(maxsize=16)
def _float32(dim: int) -> struct.Struct:
    return struct.Struct(f"={dim}f")  # native order: sqlite-vec reads the blob as float[]


def check_namespace(namespace: Any, *, allow_empty: bool = False) -> tuple[str, ...]:
    """``namespace`` as a tuple of non-empty strings, or a ``MemoryStoreError``."""
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise MemoryStoreError(
            f"a namespace is a tuple of strings such as ('users', 'u1'), not {namespace!r}."
        )
    ns = tuple(namespace)
    if not ns and not allow_empty:
        raise MemoryStoreError("an item's namespace needs at least one label, e.g. ('notes',).")
    for label in ns:
        if not isinstance(label, str) or not label:
            raise MemoryStoreError(
                f"namespace {ns!r} has the label {label!r}; every label is a non-empty string."
            )
    return ns


def ns_text(namespace: tuple[str, ...]) -> str:
    """The stored form of a namespace: compact ASCII JSON."""
    return json.dumps(list(namespace), ensure_ascii=True, separators=(",", ":"))


def prefix_condition(prefix: tuple[str, ...], column: str = "ns", mark: str = "?") -> tuple[str, list[Any]]:
    """SQL selecting the namespaces equal to ``prefix`` or below it (``mark``: the parameter marker).

    The column must compare by code point (SQLite's default, ``COLLATE "C"`` in PostgreSQL).
    """
    if not prefix:
        return ("1" if mark == "?" else "TRUE"), []
    exact = ns_text(prefix)
    below = exact[:-1] + ","
    # Stored text is ASCII, so every namespace below the prefix sorts before below + U+0080.
    m = mark
    return f"({column} = {m} OR ({column} >= {m} AND {column} < {m}))", [exact, below, below + "\x80"]


def check_vector(vector: Sequence[float], what: str, metric: str | None) -> bytes:
    """``vector`` as float32 bytes, or a ``MemoryStoreError`` saying what is wrong with it."""
    try:
        blob = _float32(len(vector)).pack(*vector)
    except (struct.error, OverflowError, TypeError) as exc:
        raise MemoryStoreError(
            f"{what} is not a list of numbers that fit in float32 ({exc}); fix the embedder."
        ) from exc
    if not math.isfinite(sum(vector)):  # any NaN or infinity makes the sum so
        raise MemoryStoreError(f"{what} has a NaN or infinite number; fix the embedder.")
    if metric == "cosine" and not any(vector):
        raise MemoryStoreError(
            f"{what} is all zeros, which has no cosine distance to anything (a lexical "
            "embedder gives zeros for a text without words); use some words, or the l2 metric."
        )
    return blob


def dimension_mismatch(where: str, held: int | None, asked: int, elsewhere: str) -> MemoryStoreError:
    """The error of an embedder whose dimension is not the store's."""
    return MemoryStoreError(
        f"{where} holds {held}-dimension vectors; an embedder of dim {asked} cannot use it. Use "
        f"the embedder it was made with, or {elsewhere}."
    )


def metadata_text(row: Row) -> str:
    try:
        return json.dumps(row.metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryStoreError(
            f"the metadata of {row.key!r} in {row.namespace!r} is not plain JSON ({exc}); use "
            "strings, numbers, booleans, None, lists and dicts."
        ) from exc


class VectorShape:
    """The dimension and metric a store's rows keep, and the checks on them both backends share."""

    where: str
    elsewhere: str
    dim: int | None
    metric: str | None

    def _load_settings(self) -> None:
        raise NotImplementedError

    def current_dim(self) -> int | None:
        """The dimension, re-read when another process may have configured the store since."""
        if self.dim is None:
            self._load_settings()
        return self.dim

    def pack(self, vector: Sequence[float], what: str) -> bytes:
        """``vector`` as float32 bytes, or a ``MemoryStoreError`` saying what is wrong with it."""
        return check_vector(vector, what, self.metric)

    def _check_dim(self, dim: int) -> None:
        if self.dim != dim:
            raise dimension_mismatch(self.where, self.dim, dim, self.elsewhere)


class StoredRows(VectorShape):
    """The tables of one memory database and the statements over them."""

    def __init__(self, db: VecDb, clock: Callable[[], float], cipher: ItemCipher | None = None):
        self.db = db
        self.where = f"the memory store {db.path!r}"
        self.elsewhere = "another data directory"
        self.clock = clock
        self.cipher = cipher
        """Seals and opens texts and metadata (``None``: they are stored in the clear)."""
        self.dim: int | None = None
        self.metric: str | None = None
        self._migrate()
        self._load_settings()

    def _migrate(self) -> None:
        try:
            version = self.db.query("PRAGMA user_version")[0][0]
            if version > SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"the memory store {self.db.path!r} was written by a newer durable (schema "
                    f"{version}); upgrade little-workflow to open it."
                )
            if version == SCHEMA_VERSION:
                return
            tables = {r[0] for r in self.db.query("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables:
                raise MemoryStoreError(
                    f"{self.db.path!r} is an SQLite database but not a memory store; point the "
                    "world at another data directory."
                )
            with self.db.write():
                self.db.run(
                    "CREATE TABLE IF NOT EXISTS items ("
                    " id INTEGER PRIMARY KEY, ns TEXT NOT NULL, key TEXT NOT NULL,"
                    " text TEXT NOT NULL, metadata TEXT NOT NULL,"
                    " created_at REAL NOT NULL, updated_at REAL NOT NULL, UNIQUE (ns, key))"
                )
                self.db.run(
                    "CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )
                self.db.run(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except self.db.errors as exc:
            raise MemoryStoreError(f"cannot open the memory store {self.db.path!r}: {exc}") from exc

    def _load_settings(self) -> None:
        got = dict(self.db.query("SELECT name, value FROM settings"))
        if "dim" in got:
            self.dim, self.metric = int(got["dim"]), str(got["metric"])

    def ensure_vectors(self, dim: int, metric: str) -> None:
        """Create the vectors table for ``dim`` and ``metric``, or check the existing one."""
        with self.db.write():
            self._load_settings()
            if self.dim is None:
                self.db.run(
                    f"CREATE VIRTUAL TABLE vectors USING vec0(embedding float[{int(dim)}] "
                    f"distance_metric={'cosine' if metric == 'cosine' else 'l2'})"
                )
                self.db.run_many(
                    "INSERT INTO settings (name, value) VALUES (?, ?)",
                    [("dim", str(dim)), ("metric", metric)],
                )
                self.dim, self.metric = dim, metric
        self._check_dim(dim)

    def write(self, rows: Sequence[Row], vectors: list[list[float]]) -> int:
        """Insert or replace ``rows`` and their vectors in one transaction."""
        packed = [
            self.pack(v, f"the embedding of {r.key!r} in {r.namespace!r}")
            for r, v in zip(rows, vectors, strict=True)
        ]
        metas: list[Any] = [metadata_text(r) for r in rows]
        now = self.clock()
        texts: dict[tuple[str, ...], str] = {}
        ns_of = [texts.get(r.namespace) or texts.setdefault(r.namespace, ns_text(r.namespace)) for r in rows]
        bodies: list[Any] = [r.text for r in rows]
        if self.cipher is not None:
            seal = self.cipher.seal
            bodies = [seal(ns, r.key, "text", t) for r, ns, t in zip(rows, ns_of, bodies, strict=True)]
            metas = [seal(ns, r.key, "metadata", m) for r, ns, m in zip(rows, ns_of, metas, strict=True)]
        with self.db.write():
            existing = self._ids(rows, ns_of)
            next_id = int(self.db.query("SELECT COALESCE(MAX(id), 0) FROM items")[0][0]) + 1
            new_items, new_vecs, upd_items, upd_vecs = [], [], [], []
            for row, ns, blob, body, meta in zip(rows, ns_of, packed, bodies, metas, strict=True):
                rowid = existing.get((ns, row.key))
                if rowid is None:
                    new_items.append((next_id, ns, row.key, body, meta, now, now))
                    new_vecs.append((next_id, blob))
                    next_id += 1
                else:
                    upd_items.append((body, meta, now, rowid))
                    upd_vecs.append((blob, rowid))
            if new_items:
                self.db.run_many("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)", new_items)
                self.db.run_many("INSERT INTO vectors (rowid, embedding) VALUES (?, ?)", new_vecs)
            if upd_items:
                self.db.run_many(
                    "UPDATE items SET text = ?, metadata = ?, updated_at = ? WHERE id = ?",
                    upd_items,
                )
                self.db.run_many("UPDATE vectors SET embedding = ? WHERE rowid = ?", upd_vecs)
        return len(rows)

    def _ids(self, rows: Sequence[Row], ns_of: list[str]) -> dict[tuple[str, str], int]:
        by_ns: dict[str, list[str]] = {}
        for r, ns in zip(rows, ns_of, strict=True):
            by_ns.setdefault(ns, []).append(r.key)
        found: dict[tuple[str, str], int] = {}
        for ns, keys in by_ns.items():
            for start in range(0, len(keys), _KEY_CHUNK):
                chunk = keys[start : start + _KEY_CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, rowid in self.db.query(
                    f"SELECT key, id FROM items WHERE ns = ? AND key IN ({marks})", [ns, *chunk]
                ):
                    found[(ns, key)] = rowid
        return found

    def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        """Delete one item and its vector together; whether it existed."""
        with self.db.write():
            got = self.db.query("SELECT id FROM items WHERE ns = ? AND key = ?", [ns_text(namespace), key])
            if not got:
                return False
            rowid = got[0][0]
            self.db.run("DELETE FROM items WHERE id = ?", [rowid])
            if self.dim is not None:
                self.db.run("DELETE FROM vectors WHERE rowid = ?", [rowid])
        return True

    def get(self, namespace: tuple[str, ...], key: str) -> tuple[str, str, float, float] | None:
        """``(text, metadata JSON, created_at, updated_at)`` of one item, or ``None``."""
        ns = ns_text(namespace)
        got = self.db.query(
            "SELECT text, metadata, created_at, updated_at FROM items WHERE ns = ? AND key = ?", [ns, key]
        )
        if not got:
            return None
        text, meta, created, updated = got[0]
        if self.cipher is not None:
            text, meta = self.cipher.open(ns, key, "text", text), self.cipher.open(ns, key, "metadata", meta)
        return text, meta, created, updated

    def knn(
        self, prefix: tuple[str, ...], vector: list[float], k: int, filter: dict[str, Any]
    ) -> list[tuple[str, str, str, str, float]]:
        """The ``k`` nearest items under ``prefix`` that ``filter`` matches, nearest first.

        The candidates are chosen by ``rowid IN (…)`` inside the vec0 KNN
        query, so the filter applies before the top-k cut. In an encrypted
        store the filter runs over the decrypted metadata of the items under
        ``prefix``, passed in as one JSON parameter (``_sealed``).
        """
        if self.dim is None:
            return []
        blob = self.pack(vector, "the query vector")
        ns_sql, ns_params = prefix_condition(prefix)
        f_sql, f_params = compile_filter(filter)
        candidates = ""
        params: list[Any] = [blob, k]
        if f_sql != "1" and self.cipher is not None:
            plain_sql = compile_filter(filter, "json_extract(value, '$[1]')")[0]
            candidates = (
                f" AND rowid IN (SELECT json_extract(value, '$[0]') FROM json_each(?) WHERE {plain_sql})"
            )
            params += [self._plain_metadata(ns_sql, ns_params), *f_params]
        elif ns_sql != "1" or f_sql != "1":
            candidates = f" AND rowid IN (SELECT id FROM items WHERE {ns_sql} AND {f_sql})"
            params += ns_params + f_params
        sql = (
            "WITH knn AS (SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ?"
            f"{candidates}) "
            "SELECT i.ns, i.key, i.text, i.metadata, knn.distance FROM knn "
            "JOIN items i ON i.id = knn.rowid ORDER BY knn.distance, i.id"
        )
        try:
            got = self.db.query(sql, params)
        except self.db.errors as exc:
            raise MemoryStoreError(f"the memory search failed in {self.db.path!r}: {exc}") from exc
        if self.cipher is None:
            return [(r[0], r[1], r[2], r[3], float(r[4])) for r in got]
        open_ = self.cipher.open
        return [
            (r[0], r[1], open_(r[0], r[1], "text", r[2]), open_(r[0], r[1], "metadata", r[3]), float(r[4]))
            for r in got
        ]

    def _plain_metadata(self, ns_sql: str, ns_params: list[Any]) -> str:
        """``[[id, metadata JSON text], …]`` of the items under a prefix, decrypted, as JSON."""
        assert self.cipher is not None
        open_ = self.cipher.open
        rows = self.db.query(f"SELECT id, ns, key, metadata FROM items WHERE {ns_sql}", ns_params)
        return json.dumps([[i, open_(ns, key, "metadata", m)] for i, ns, key, m in rows])

    def namespaces(self, prefix: tuple[str, ...]) -> list[str]:
        """The stored namespace texts under ``prefix``."""
        sql, params = prefix_condition(prefix)
        return [r[0] for r in self.db.query(f"SELECT DISTINCT ns FROM items WHERE {sql}", params)]

    def count(self, prefix: tuple[str, ...]) -> int:
        """How many items are under ``prefix``."""
        sql, params = prefix_condition(prefix)
        return int(self.db.query(f"SELECT COUNT(*) FROM items WHERE {sql}", params)[0][0])

    def close(self) -> None:
        """Close the database connection (a second call does nothing)."""
        self.db.close()
