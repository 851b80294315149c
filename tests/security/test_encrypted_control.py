"""The control store of an encrypted world: debounced inputs and blocked runs' errors, sealed and readable."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable import CodecError, EncryptionCodec
from durable.runtime import control_of, run_status
from tests.helpers import pg
from tests.helpers.audit_world import MARKS
from tests.helpers.audit_world import blocked as booking
from tests.helpers.waiting import until

pytest.importorskip("cryptography")

KEY = bytes(range(32))
MARK = MARKS["blocked_error"]


@durable.workflow
async def echo(x: str) -> str:
    return f"got {x}"


@pytest.fixture(params=["sqlite", "postgres"])
def open_world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A function that opens an encrypted world (a data directory, or a fresh Postgres schema)."""
    if request.param == "sqlite":
        yield lambda **kw: durable.local_world(tmp_path, codec=EncryptionCodec(KEY), **kw)
        return
    dsn = request.getfixturevalue("pg_server").dsn
    schema = pg.new_schema()
    yield lambda **kw: durable.postgres_world(dsn, schema=schema, codec=EncryptionCodec(KEY), **kw)
    pg.drop_schema(dsn, schema)


def test_a_debounced_start_of_an_encrypted_world_runs_with_the_last_input(open_world: object) -> None:
    """A later start of the burst moves its sealed input into the first start's record, which still opens."""

    async def main() -> str:
        now = [1000.0]
        with open_world(clock=lambda: now[0]) as world:  # type: ignore[operator]
            handles = [
                durable.start_workflow(echo, f"v{n}", world=world, queue="d", debounce_key="k", debounce=10)
                for n in (1, 2, 3)
            ]
            assert len({h.run_id for h in handles}) == 1
            now[0] += 60
            async with durable.Worker(world, workflows=[echo], queues=["d"]):
                out: str = await handles[0].result(timeout=60)
                return out

    assert asyncio.run(main()) == "got v3"


def test_a_blocked_run_s_error_is_sealed_and_reads_back_with_the_key(open_world: object) -> None:
    """The blocked record keeps its reason and key readable, its error's message sealed; the key opens it."""

    async def main() -> dict[str, object] | None:
        with open_world() as world:  # type: ignore[operator]
            run = durable.start_workflow(booking, "o1", world=world, run_id="b1", queue="q")
            async with durable.Worker(world, workflows=[booking], queues=["q"]):
                await until(lambda: run_status(world, "b1").status == "blocked", what="the blocked run")
            with pytest.raises(durable.RunBlockedError) as info:
                await run.result(timeout=1)
            assert isinstance(info.value.cause, durable.CompensationFailedError)
            assert MARK in str(info.value.cause)
            stored = control_of(world).get("b1")
            assert stored is not None and stored.blocked is not None
            assert MARK not in stored.blocked and '"reason": "compensation_failed"' in stored.blocked
            return (await run.status_detail()).error

    error = asyncio.run(main())
    assert error is not None and MARK in str(error["error_message"])
    assert error["key"] == "compensate:tool:charge#0"


def test_a_blocked_error_moved_to_another_run_does_not_decrypt(tmp_path: Path) -> None:
    """The sealed message is bound to its run id: copied to another run's record it raises CodecError."""

    async def block(world: durable.World) -> None:
        for rid in ("b1", "b2"):
            durable.start_workflow(booking, rid, world=world, run_id=rid, queue="q")
        async with durable.Worker(world, workflows=[booking], queues=["q"]):
            for rid in ("b1", "b2"):
                await until(lambda rid=rid: run_status(world, rid).status == "blocked", what=rid)

    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        asyncio.run(block(world))
    db = sqlite3.connect(tmp_path / "runtime.db")
    (moved,) = db.execute("SELECT blocked FROM control WHERE run_id = 'b1'").fetchone()
    db.execute("UPDATE control SET blocked = ? WHERE run_id = 'b2'", (moved,))
    db.commit()
    db.close()
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        assert asyncio.run(durable.handle("b1", world=world).status()) == "blocked"
        with pytest.raises(CodecError):
            asyncio.run(durable.handle("b2", world=world).status_detail())
