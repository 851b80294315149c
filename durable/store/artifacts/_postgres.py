"""Artifacts and small documents of a Postgres world.

``PostgresArtifacts`` keeps artifact payloads as content-addressed rows
(``sha256`` is the key, so storing the same bytes twice is one row; a row
whose bytes do not match its hash is rewritten). ``PostgresDocuments`` is a
mapping of JSON documents by key in one namespace, for state that a local
world keeps in small files (outer-loop manifests).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..postgres._schema import Database
from ._protocol import hex_of, sha256_of

if TYPE_CHECKING:
    from psycopg import Connection


class PostgresArtifacts:
    """Artifact payloads in the ``artifacts`` table (``ArtifactStore`` protocol)."""

    def __init__(self, db: Database):
        self.db = db

    def put(self, data: bytes, manifest: dict[str, Any]) -> str | None:
        """Store ``data`` under its hash once; rewrite a stored row whose bytes are damaged."""
        tag = manifest["sha256"]
        text = json.dumps(manifest, sort_keys=True)

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(
                self.db.sql(
                    "INSERT INTO {s}.artifacts (sha256, data, manifest) VALUES (%s, %s, %s) "
                    "ON CONFLICT (sha256) DO UPDATE SET data = excluded.data "
                    "WHERE {s}.artifacts.data IS DISTINCT FROM excluded.data"
                ),
                (tag, data, text),
            )

        self.db.run(op)
        return None

    def get(self, sha256: str) -> bytes | None:
        """The stored payload, or ``None``."""

        def op(conn: Connection[Any], attempt: int) -> bytes | None:
            row = conn.execute(self.db.sql("SELECT data FROM {s}.artifacts WHERE sha256 = %s"), (sha256,))
            found = row.fetchone()
            return None if found is None else bytes(found[0])

        return self.db.run(op)

    def delete(self, sha256: str) -> None:
        """Remove the payload's row (absent is fine)."""

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(self.db.sql("DELETE FROM {s}.artifacts WHERE sha256 = %s"), (sha256,))

        self.db.run(op)

    def holds_any(self) -> bool:
        """Whether the store holds any payload (``gc`` reads the logs of the runs it deletes only then)."""

        def op(conn: Connection[Any], attempt: int) -> bool:
            row = conn.execute(self.db.sql("SELECT EXISTS (SELECT 1 FROM {s}.artifacts)")).fetchone()
            return bool(row and row[0])

        return self.db.run(op)

    def resolve(self, location: str | None) -> Path | None:
        """Always ``None``: payloads live in the database, not in files."""
        return None

    def verify(self, sha256: str) -> bool:
        """Whether the stored payload still hashes to its key."""
        data = self.get(sha256)
        return data is not None and hex_of(sha256_of(data)) == hex_of(sha256)


class PostgresDocuments(MutableMapping[str, str]):
    """Text documents by key in one namespace of the ``documents`` table.

    Args:
        db: The pool and schema.
        namespace: The namespace (``outer_loops`` for outer-loop manifests).
    """

    def __init__(self, db: Database, namespace: str):
        self.db = db
        self.namespace = namespace

    def __getitem__(self, key: str) -> str:
        def op(conn: Connection[Any], attempt: int) -> str | None:
            row = conn.execute(
                self.db.sql("SELECT value FROM {s}.documents WHERE namespace = %s AND key = %s"),
                (self.namespace, key),
            ).fetchone()
            return None if row is None else str(row[0])

        value = self.db.run(op)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(
                self.db.sql(
                    "INSERT INTO {s}.documents (namespace, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value"
                ),
                (self.namespace, key, value),
            )

        self.db.run(op)

    def __delitem__(self, key: str) -> None:
        def op(conn: Connection[Any], attempt: int) -> int:
            return conn.execute(
                self.db.sql("DELETE FROM {s}.documents WHERE namespace = %s AND key = %s"),
                (self.namespace, key),
            ).rowcount

        if not self.db.run(op):
            raise KeyError(key)

    def _keys(self) -> list[str]:
        def op(conn: Connection[Any], attempt: int) -> list[str]:
            cur = conn.execute(
                self.db.sql("SELECT key FROM {s}.documents WHERE namespace = %s ORDER BY key"),
                (self.namespace,),
            )
            return [str(r[0]) for r in cur]

        return self.db.run(op)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())
