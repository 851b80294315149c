"""The memory store of a Postgres world: one memory for every process, and the pgvector extension.

The store's behaviour is the one the other files of this folder check on
every backend (their ``world`` runs on Postgres with pgvector too); here is
what only a Postgres world has: a schema that many worlds open at once, a
server without the extension, a role that may not create it.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator

import pytest

import durable
from durable import MemoryStoreError
from tests.helpers.pg import Server, drop_schema, new_schema


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@durable.workflow
async def plain(x: str) -> str:
    return x


@pytest.fixture
def schema(pgvector_server: Server) -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(pgvector_server.dsn, name)


def test_two_worlds_on_one_schema_share_one_memory(pgvector_server: Server, schema: str) -> None:
    """What one world puts, another world on the same schema finds, gets and counts."""
    dsn = pgvector_server.dsn
    with (
        durable.postgres_world(dsn, schema=schema) as one,
        durable.postgres_world(dsn, schema=schema) as two,
    ):
        first = one.memory.configure(durable.lexical_embedder(dim=32))
        second = two.memory.configure(durable.lexical_embedder(dim=32))
        run(first.put(("users", "ada"), "tea", "Ada drinks green tea", {"kind": "fact"}))
        run(second.put(("users", "bo"), "bike", "Bo rides a red bike", {"kind": "fact"}))
        hits = run(second.search(("users",), "green tea", k=1, filter={"kind": "fact"}))
        assert [(h.namespace, h.key) for h in hits] == [(("users", "ada"), "tea")]
        assert run(first.count(("users",))) == 2
        got = run(first.get(("users", "bo"), "bike"))
        assert got is not None and got.text == "Bo rides a red bike"


def test_a_new_world_keeps_the_dimension_and_metric_of_the_schema(
    pgvector_server: Server, schema: str
) -> None:
    """The first configure fixes the store's dimension and metric; another is refused, naming both."""
    dsn = pgvector_server.dsn
    with durable.postgres_world(dsn, schema=schema) as world:
        world.memory.configure(durable.lexical_embedder(dim=16), metric="l2")
    with durable.postgres_world(dsn, schema=schema) as world:
        with pytest.raises(MemoryStoreError, match=r"holds 16-dimension vectors.*another schema"):
            world.memory.configure(durable.lexical_embedder(dim=32))
        with pytest.raises(MemoryStoreError, match="measures l2 distance"):
            world.memory.configure(durable.lexical_embedder(dim=16), metric="cosine")
        assert world.memory.configure(durable.lexical_embedder(dim=16)).metric == "l2"


def test_a_nul_character_is_refused_before_anything_is_written(pgvector_server: Server, schema: str) -> None:
    """PostgreSQL text cannot hold U+0000: the put says so, in the text, the key or the metadata."""
    with durable.postgres_world(pgvector_server.dsn, schema=schema) as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=16))
        for args in (("k", "a\x00b", {}), ("k\x00", "words", {}), ("k", "words", {"a": ["x\x00"]})):
            with pytest.raises(MemoryStoreError, match="U\\+0000"):
                run(mem.put(("n",), *args))
        assert run(mem.count()) == 0
        assert run(mem.get(("n",), "k\x00")) is None


def test_a_codec_on_a_plain_schema_with_memory_items_is_refused(pgvector_server: Server, schema: str) -> None:
    """A codec over items kept in the clear: world.memory is refused, and the error says how to encrypt."""
    dsn = pgvector_server.dsn
    with durable.postgres_world(dsn, schema=schema) as world:
        run(world.memory.configure(durable.lexical_embedder(dim=16)).put(("n",), "k", "in the clear"))
    with (
        durable.postgres_world(dsn, schema=schema, codec=durable.EncryptionCodec(bytes(range(32)))) as world,
        pytest.raises(durable.CodecError, match=r"little rekey --dsn"),
    ):
        world.memory  # noqa: B018


def _server_has_pgvector(dsn: str) -> bool:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is not None
        )


def test_a_server_without_pgvector_names_the_extension_and_how_to_install_it(pg_server: Server) -> None:
    """world.memory on a server without pgvector raises MemoryStoreError naming it; the world works on."""
    if _server_has_pgvector(pg_server.dsn):
        pytest.skip("this test needs a server without pgvector; this one has it")
    import psycopg

    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone()
    assert row is not None
    schema = new_schema()
    try:
        with durable.postgres_world(pg_server.dsn, schema=schema) as world:
            with pytest.raises(MemoryStoreError) as info:
                world.memory  # noqa: B018
            message = str(info.value)
            assert "pgvector extension (`vector`)" in message
            assert f"PostgreSQL {row[0]} server" in message
            assert f"postgresql-{row[0]}-pgvector" in message
            assert "CREATE EXTENSION vector;" in message
            assert run(durable.run_workflow(plain, "still works", world=world, run_id="r")) == "still works"
    finally:
        drop_schema(pg_server.dsn, schema)


def test_a_role_that_may_not_create_the_extension_is_told_the_command_that_works(
    pgvector_server: Server,
) -> None:
    """In a database without the extension, a plain role is told to run CREATE EXTENSION; doing so works."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"m_{uuid.uuid4().hex[:12]}"
    admin = pgvector_server.dsn
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute(f'GRANT CREATE ON DATABASE "{name}" TO "{name}"')
    db_admin = make_conninfo(admin, dbname=name)
    as_role = make_conninfo(admin, dbname=name, user=name)
    assert conninfo_to_dict(as_role)["user"] == name
    try:
        with durable.postgres_world(as_role, schema="app", max_size=2) as world:
            with pytest.raises(MemoryStoreError) as info:
                world.memory  # noqa: B018
            message = str(info.value)
            assert f"the role {name!r} may not create it" in message
            command = re.search(r"Run `([^`]+)` in the database", message)
            assert command is not None and command.group(1) == "CREATE EXTENSION vector;"
            with psycopg.connect(db_admin, autocommit=True) as conn:  # what the message says, as a superuser
                conn.execute(command.group(1))
            mem = world.memory.configure(durable.lexical_embedder(dim=16))
            run(mem.put(("n",), "k", "now it works"))
            assert [h.key for h in run(mem.search(("n",), "works"))] == ["k"]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')


FILTERS: list[dict[str, object]] = [
    {},
    {"kind": "fact"},
    {"kind": {"$ne": "fact"}},
    {"n": {"$gte": 2, "$lt": 5}},
    {"n": {"$in": [1, 4]}, "kind": "fact"},
    {"source.site": "docs"},
]


def test_an_encrypted_schema_seals_items_and_filters_as_a_plain_one(pgvector_server: Server) -> None:
    """Under a codec texts and metadata are ciphertext; every filter finds what it finds in the clear."""
    import psycopg

    dsn, codec = pgvector_server.dsn, durable.EncryptionCodec(bytes(range(32)))
    schemas = [new_schema(), new_schema()]
    found: list[list[list[str]]] = []
    try:
        for schema, c in zip(schemas, (None, codec), strict=True):
            with durable.postgres_world(dsn, schema=schema, codec=c) as world:
                mem = world.memory.configure(durable.lexical_embedder(dim=32))
                run(
                    mem.put_many(
                        {
                            "namespace": ("docs", str(i % 2)),
                            "key": f"k{i}",
                            "text": f"OKAPI note number {i} about tea",
                            "metadata": {
                                "kind": "fact" if i % 3 else "idea",
                                "n": i,
                                "source": {"site": "docs"},
                            },
                        }
                        for i in range(8)
                    )
                )
                found.append(
                    [[h.key for h in run(mem.search(("docs",), "tea note", k=4, filter=f))] for f in FILTERS]
                )
                assert run(mem.get(("docs", "1"), "k3")).metadata["n"] == 3  # type: ignore[union-attr]
        assert found[0] == found[1] and all(found[0][1:])
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                f'SELECT text, metadata, sealed_text, sealed_metadata FROM "{schemas[1]}".memory_items'
            ).fetchall()
        assert rows and all(t is None and m is None for t, m, _, _ in rows)
        assert not any(b"OKAPI" in bytes(st) or b"fact" in bytes(sm) for _, _, st, sm in rows)
    finally:
        for schema in schemas:
            drop_schema(dsn, schema)
