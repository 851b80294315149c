"""An encrypted Postgres world: no plaintext in any row of its schema, typed refusals without the key."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import durable
from durable import EncryptionCodec, KeyMismatchError
from tests.helpers.pg import Server, drop_schema, new_schema

pytest.importorskip("cryptography")

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
MARKS = ["ZEBRA-INPUT", "ZEBRA-STEP-OUT", "ZEBRA-TOOL-OUT", "ZEBRA-ARTIFACT", "ZEBRA-QUEUED"]


@durable.tool
async def lookup(q: str) -> str:
    return f"{q} ZEBRA-TOOL-OUT"


@durable.step
async def summarise(x: str) -> str:
    return f"{x} ZEBRA-STEP-OUT"


@durable.workflow
async def agent(x: str) -> str:
    ref = await durable.save_artifact("notes.txt", b"ZEBRA-ARTIFACT body " * 20)
    return await summarise(await lookup(x)) + f" {len(ref.read())}"


@pytest.fixture
def schema(pg_server: Server) -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(pg_server.dsn, name)


def _rows_as_text(dsn: str, schema: str) -> str:
    """Every value of every row of every table of the schema (bytes read as latin-1)."""
    import psycopg

    out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
            )
        ]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{schema}"."{table}"'):  # type: ignore[call-overload]
                for value in row:
                    raw = bytes(value) if isinstance(value, bytes | memoryview) else None
                    out.append(raw.decode("latin-1") if raw is not None else str(value))
    return "\n".join(out)


def _run(dsn: str, schema: str, codec: EncryptionCodec | None) -> str:
    async def main() -> str:
        with durable.postgres_world(dsn, schema=schema, codec=codec) as world:
            out: str = await durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1")
            queued = durable.start_workflow(agent, "ZEBRA-QUEUED", world=world, queue="later")
            assert await queued.status() == "enqueued"
            return out

    return asyncio.run(main())


def test_a_plain_postgres_world_shows_the_marks(pg_server: Server, schema: str) -> None:
    """The scan finds the plaintext of a plain world: the encrypted test below means something."""
    _run(pg_server.dsn, schema, None)
    text = _rows_as_text(pg_server.dsn, schema)
    assert all(m in text for m in MARKS)


def test_an_encrypted_postgres_world_keeps_no_plaintext_and_refuses_without_the_key(
    pg_server: Server, schema: str
) -> None:
    out = _run(pg_server.dsn, schema, EncryptionCodec(KEY))
    assert out.startswith("ZEBRA-INPUT ZEBRA-TOOL-OUT ZEBRA-STEP-OUT")
    text = _rows_as_text(pg_server.dsn, schema)
    assert [m for m in MARKS if m in text] == []
    for codec in (None, EncryptionCodec(OTHER)):
        with pytest.raises(KeyMismatchError):
            durable.postgres_world(pg_server.dsn, schema=schema, codec=codec)
    with durable.postgres_world(pg_server.dsn, schema=schema, codec=EncryptionCodec(KEY)) as world:
        again = asyncio.run(durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1"))
    assert again == out


@durable.workflow
async def chat(x: str) -> str:
    message = await durable.recv(timeout=60)
    return f"{x} got {message}"


@pytest.mark.parametrize("encrypted", [False, True])
def test_messages_to_a_run_of_an_encrypted_postgres_world_are_ciphertext(
    pg_server: Server, schema: str, encrypted: bool
) -> None:
    """The mailbox rows and the run's message.received hold no plaintext (the plain world shows it)."""

    async def main() -> str:
        codec = EncryptionCodec(KEY) if encrypted else None
        with durable.postgres_world(pg_server.dsn, schema=schema, codec=codec) as world:
            run = durable.start_workflow(chat, "ZEBRA-INPUT", world=world, run_id="c1")
            await durable.send("c1", "ZEBRA-MESSAGE", world=world)
            out: str = await run.result(timeout=60)
            return out

    assert asyncio.run(main()) == "ZEBRA-INPUT got ZEBRA-MESSAGE"
    text = _rows_as_text(pg_server.dsn, schema)
    assert ("ZEBRA-MESSAGE" in text) is not encrypted
    assert ("ZEBRA-INPUT" in text) is not encrypted
