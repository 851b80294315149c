"""The memory store's rows in a Postgres world's schema, searched with pgvector.

Items live in ``memory_items``, a table of the world's schema created by its
migrations like every other; its ``embedding`` column has pgvector's
``vector`` type, so it is added the first time a process opens the world's
memory, once the ``vector`` extension is there (created then when the
server has it and the role may). A world never needs the extension for
anything else. The dimension and the metric are a document of the schema
(``documents``, namespace ``memory``). A search is one exact query: the
namespace prefix and the metadata filter in its ``WHERE``, ordered by
pgvector's distance operator (``<=>`` cosine, ``<->`` Euclidean) with no
approximate index, so a filter never eats into the ``k`` hits and results
equal a brute-force ranking.

Under a codec an item's text and metadata are sealed as in the SQLite
store (``_sealed``), in ``sealed_text`` and ``sealed_metadata``; ``text``
and ``metadata`` then stay empty. A filtered search hands the decrypted
metadata of the items under the prefix to the same condition as one
``jsonb`` parameter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CodecError, MemoryStoreError
from ..security import Codec
from ._filter import POSTGRES, compile_filter
from ._sealed import ItemCipher
from ._tables import Row, VectorShape, metadata_text, ns_text, prefix_condition

if TYPE_CHECKING:
    from psycopg import Connection

    from ..store import Database

SETTINGS = ("memory", "vectors")
"""The ``documents`` row (namespace, key) that holds the store's dimension and metric."""

_OPERATOR = {"cosine": "<=>", "l2": "<->"}


def _no_nul(value: str, what: str) -> None:
    if "\x00" in value:
        raise MemoryStoreError(
            f"{what} holds the character U+0000, which PostgreSQL cannot store in text or JSON; "
            "remove it (or escape it) before putting the item."
        )


def _no_nul_json(value: Any, what: str) -> None:
    """Refuse a U+0000 in a key or string of metadata: no ``jsonb`` (so no filter) can hold it."""
    if isinstance(value, str):
        _no_nul(value, what)
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_nul(str(k), what)
            _no_nul_json(v, what)
    elif isinstance(value, list):
        for v in value:
            _no_nul_json(v, what)


def _vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def resealed(reading: Codec | None, new: Codec | None, row: Sequence[Any], where: str) -> dict[str, Any]:
    """The columns of a ``memory_items`` row rewritten under ``new`` (``None``: in the clear), for a rekey.

    Args:
        reading: Opens a sealed row (the old key, or the new one for a row a stopped rekey rewrote).
        new: The codec the row is sealed under from now on.
        row: ``(id, ns, key, text, metadata, sealed_text, sealed_metadata)``.
        where: How messages name the schema.

    Raises:
        CodecError: The row is sealed and ``reading`` is ``None``, or it does not decrypt.
    """
    _, ns, key, text, meta, sealed_text, sealed_meta = row
    if sealed_text is not None:
        if reading is None:
            raise CodecError(f"memory item {key!r} in namespace {ns} is encrypted: give its key; stopped")
        opener = ItemCipher(reading, where)
        text = opener.open(ns, key, "text", bytes(sealed_text))
        meta = opener.open(ns, key, "metadata", bytes(sealed_meta))
    if new is None:
        return {"text": text, "metadata": meta, "sealed_text": None, "sealed_metadata": None}
    sealer = ItemCipher(new, where)
    return {
        "text": None,
        "metadata": None,
        "sealed_text": sealer.seal(ns, key, "text", text),
        "sealed_metadata": sealer.seal(ns, key, "metadata", meta),
    }


class PostgresRows(VectorShape):
    """The ``memory_items`` table of one schema and the statements over it (``ItemRows``).

    Args:
        db: The world's database (its pool and schema).
        clock: The clock of ``created_at`` and ``updated_at``.
        cipher: Seals texts and metadata (``None``: they are stored in the clear).

    Raises:
        MemoryStoreError: The server lacks pgvector, or the role may not create the extension.
        CodecError: ``cipher`` is given but the store holds items in the clear.
    """

    def __init__(self, db: Database, clock: Callable[[], float], cipher: ItemCipher | None = None):
        self.db = db
        self.where = f"the memory store of the PostgreSQL schema {db.schema!r} at {db.where}"
        """How messages name the store (``PostgresMemory`` names its cipher the same way)."""
        self.elsewhere = "another schema"
        self.clock = clock
        self.cipher = cipher
        self.dim: int | None = None
        self.metric: str | None = None
        self._items = db.sql("{s}.memory_items")
        vector = db.run(self._prepare)
        self._vector = vector
        self._load_settings()

    # -- opening -----------------------------------------------------------------------------

    def _prepare(self, conn: Connection[Any], attempt: int) -> str:
        """The extension's ``vector`` type, created with the ``embedding`` column when missing."""
        from psycopg import errors

        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"durable-memory:{self.db.schema}",))
            found = conn.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                "WHERE e.extname = 'vector'"
            ).fetchone()
            if found is None:
                self._create_extension(conn, errors)
                found = conn.execute(
                    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                    "WHERE e.extname = 'vector'"
                ).fetchone()
                assert found is not None
            nsp = '"' + str(found[0]).replace('"', '""') + '"'
            has_column = conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'memory_items' AND column_name = 'embedding'",
                (self.db.schema,),
            ).fetchone()
            if has_column is None:
                conn.execute(f"ALTER TABLE {self._items} ADD COLUMN embedding {nsp}.vector NOT NULL")
            if (
                self.cipher is not None
                and conn.execute(f"SELECT 1 FROM {self._items} WHERE text IS NOT NULL LIMIT 1").fetchone()
            ):
                raise CodecError(
                    f"{self.where} holds items that are not encrypted; a codec cannot be added to it "
                    "as it is. Encrypt the schema first with `little rekey --dsn DSN --schema "
                    f"{self.db.schema}` (LITTLE_KEY set to the new key), or open it without a codec. "
                    "Nothing was written."
                )
        return nsp

    def _create_extension(self, conn: Connection[Any], errors: Any) -> None:
        """``CREATE EXTENSION vector`` where the server has it, or the error that says how to get it."""
        info = conn.execute(
            "SELECT current_setting('server_version_num')::int / 10000, current_database(), current_user, "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
        ).fetchone()
        assert info is not None
        major, database, user, available = info
        if not available:
            raise MemoryStoreError(
                f"world.memory on a Postgres world needs the pgvector extension (`vector`), which the "
                f"PostgreSQL {major} server at {self.db.where} does not have. Install pgvector on that "
                f"server (the package postgresql-{major}-pgvector of the PostgreSQL apt repository, "
                "`brew install pgvector`, the pgvector/pgvector image, or a build from the pgvector "
                f"sources), then run `CREATE EXTENSION vector;` in the database {database!r} as a "
                "superuser, or open world.memory again as one. The rest of the Postgres world works "
                "without it; a local_world() keeps its memory in SQLite."
            )
        try:
            with conn.transaction():  # a savepoint: a refused CREATE leaves the outer transaction usable
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except errors.InsufficientPrivilege:
            raise MemoryStoreError(
                f"world.memory on a Postgres world needs the pgvector extension (`vector`); the "
                f"PostgreSQL {major} server at {self.db.where} has it, but the database {database!r} "
                f"does not use it yet and the role {user!r} may not create it. Run `CREATE EXTENSION "
                f"vector;` in the database {database!r} as a superuser (once for every schema of "
                "that database), then open world.memory again."
            ) from None

    def _load_settings(self) -> None:
        def op(conn: Connection[Any], attempt: int) -> Any:
            return conn.execute(
                self.db.sql("SELECT value FROM {s}.documents WHERE namespace = %s AND key = %s"), SETTINGS
            ).fetchone()

        row = self.db.run(op)
        if row is not None:
            got = json.loads(row[0])
            self.dim, self.metric = int(got["dim"]), str(got["metric"])

    def ensure_vectors(self, dim: int, metric: str) -> None:
        """Record ``dim`` and ``metric`` for a new store, or check the store's."""
        if self.dim is None:
            value = json.dumps({"dim": int(dim), "metric": "cosine" if metric == "cosine" else "l2"})

            def op(conn: Connection[Any], attempt: int) -> None:
                conn.execute(
                    self.db.sql(
                        "INSERT INTO {s}.documents (namespace, key, value) VALUES (%s, %s, %s) "
                        "ON CONFLICT (namespace, key) DO NOTHING"
                    ),
                    (*SETTINGS, value),
                )

            self.db.run(op)  # the first process to configure the store fixes them; the others read them
            self._load_settings()
        self._check_dim(dim)

    # -- writes ------------------------------------------------------------------------------

    def write(self, rows: Sequence[Row], vectors: list[list[float]]) -> int:
        """Insert or replace ``rows`` and their vectors in one transaction."""
        params: list[tuple[Any, ...]] = []
        now = self.clock()
        for r, v in zip(rows, vectors, strict=True):
            self.pack(v, f"the embedding of {r.key!r} in {r.namespace!r}")
            ns = ns_text(r.namespace)
            meta = metadata_text(r)
            for value, what in ((ns, "the namespace"), (r.key, "the key"), (r.text, "the text")):
                _no_nul(value, f"{what} of {r.key!r} in {r.namespace!r}")
            _no_nul_json(r.metadata, f"the metadata of {r.key!r} in {r.namespace!r}")
            if self.cipher is None:
                sealed: tuple[Any, ...] = (r.text, meta, None, None)
            else:
                seal = self.cipher.seal
                sealed = (None, None, seal(ns, r.key, "text", r.text), seal(ns, r.key, "metadata", meta))
            params.append((ns, r.key, *sealed, now, now, _vector_text(v)))
        sql = (
            f"INSERT INTO {self._items} AS i (ns, key, text, metadata, sealed_text, sealed_metadata, "
            f"created_at, updated_at, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
            f"%s::{self._vector}.vector) ON CONFLICT (ns, key) DO UPDATE SET text = excluded.text, "
            "metadata = excluded.metadata, sealed_text = excluded.sealed_text, "
            "sealed_metadata = excluded.sealed_metadata, updated_at = excluded.updated_at, "
            "embedding = excluded.embedding"
        )

        def op(conn: Connection[Any], attempt: int) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(sql, params)

        self.db.run(op)  # an upsert: a retry after a lost commit writes the same items again
        return len(rows)

    def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        """Delete one item and its vector together; whether it existed."""
        ns = ns_text(namespace)

        def op(conn: Connection[Any], attempt: int) -> bool:
            cur = conn.execute(f"DELETE FROM {self._items} WHERE ns = %s AND key = %s", (ns, key))
            return cur.rowcount > 0

        if "\x00" in ns or "\x00" in key:
            return False  # never stored
        return bool(self.db.run(op))

    # -- reads -------------------------------------------------------------------------------

    def _open(self, ns: str, key: str, row: Sequence[Any]) -> tuple[str, str]:
        """The text and metadata JSON of a row ``(text, metadata, sealed_text, sealed_metadata)``."""
        text, meta, sealed_text, sealed_meta = row
        if self.cipher is not None:
            if sealed_text is not None:  # else ItemCipher.open names the value in the clear
                text, meta = bytes(sealed_text), bytes(sealed_meta)
            return self.cipher.open(ns, key, "text", text), self.cipher.open(ns, key, "metadata", meta)
        if text is None:
            raise CodecError(
                f"the memory item {key!r} in namespace {ns} of {self.where} is encrypted, and this "
                "world has no codec. Open it with codec=durable.EncryptionCodec(key)."
            )
        return str(text), str(meta)

    def get(self, namespace: tuple[str, ...], key: str) -> tuple[str, str, float, float] | None:
        """``(text, metadata JSON, created_at, updated_at)`` of one item, or ``None``."""
        ns = ns_text(namespace)
        if "\x00" in ns or "\x00" in key:
            return None

        def op(conn: Connection[Any], attempt: int) -> Any:
            return conn.execute(
                f"SELECT text, metadata, sealed_text, sealed_metadata, created_at, updated_at "
                f"FROM {self._items} WHERE ns = %s AND key = %s",
                (ns, key),
            ).fetchone()

        row = self.db.run(op)
        if row is None:
            return None
        text, meta = self._open(ns, key, row[:4])
        return text, meta, float(row[4]), float(row[5])

    def knn(
        self, prefix: tuple[str, ...], vector: list[float], k: int, filter: dict[str, Any]
    ) -> list[tuple[str, str, str, str, float]]:
        """The ``k`` nearest items under ``prefix`` that ``filter`` matches, nearest first.

        The prefix and the filter are conditions of the same query that
        orders by distance, so the filter applies before the top-k cut. In an
        encrypted store the filter runs over the decrypted metadata of the
        items under ``prefix``, passed in as one ``jsonb`` parameter.
        """
        if self.dim is None or self.metric is None:
            return []
        self.pack(vector, "the query vector")
        ns_sql, ns_params = prefix_condition(prefix, mark="%s")
        f_sql, f_params = compile_filter(filter, "metadata::jsonb", POSTGRES)
        where, params = ns_sql, list(ns_params)
        if f_sql != POSTGRES.true and self.cipher is not None:
            plain_sql = compile_filter(filter, "(e -> 1)", POSTGRES)[0]
            where += (
                " AND id IN (SELECT (e ->> 0)::bigint FROM jsonb_array_elements(%s::jsonb) AS e "
                f"WHERE {plain_sql})"
            )
            params += [self._plain_metadata(ns_sql, ns_params), *f_params]
        elif f_sql != POSTGRES.true:
            where += f" AND {f_sql}"
            params += f_params
        operator = f"OPERATOR({self._vector}.{_OPERATOR[self.metric]})"
        sql = (
            f"SELECT ns, key, text, metadata, sealed_text, sealed_metadata, "
            f"embedding {operator} %s::{self._vector}.vector AS distance FROM {self._items} "
            f"WHERE {where} ORDER BY distance, id LIMIT %s"
        )
        query = _vector_text(vector)

        def op(conn: Connection[Any], attempt: int) -> list[Any]:
            return conn.execute(sql, (query, *params, k)).fetchall()

        got = self.db.run(op)
        out = []
        for ns, key, *row, distance in got:
            text, meta = self._open(ns, key, row)
            out.append((ns, key, text, meta, float(distance)))
        return out

    def _plain_metadata(self, ns_sql: str, ns_params: list[Any]) -> str:
        """``[[id, metadata], …]`` of the items under a prefix, decrypted, as one JSON text."""
        assert self.cipher is not None
        open_ = self.cipher.open

        def op(conn: Connection[Any], attempt: int) -> list[Any]:
            return conn.execute(
                f"SELECT id, ns, key, sealed_metadata FROM {self._items} WHERE {ns_sql}", ns_params
            ).fetchall()

        rows = self.db.run(op)
        return "[" + ",".join(f"[{i},{open_(ns, key, 'metadata', bytes(m))}]" for i, ns, key, m in rows) + "]"

    def namespaces(self, prefix: tuple[str, ...]) -> list[str]:
        """The stored namespace texts under ``prefix``."""
        sql, params = prefix_condition(prefix, mark="%s")

        def op(conn: Connection[Any], attempt: int) -> list[str]:
            return [r[0] for r in conn.execute(f"SELECT DISTINCT ns FROM {self._items} WHERE {sql}", params)]

        return list(self.db.run(op))

    def count(self, prefix: tuple[str, ...]) -> int:
        """How many items are under ``prefix``."""
        sql, params = prefix_condition(prefix, mark="%s")

        def op(conn: Connection[Any], attempt: int) -> int:
            row = conn.execute(f"SELECT count(*) FROM {self._items} WHERE {sql}", params).fetchone()
            return int(row[0]) if row else 0

        return int(self.db.run(op))

    def close(self) -> None:
        """Nothing to close: the world's pool is closed with the world."""
