"""gc removes every trace of a run it collects on every backend: log, messages, control, outbox, artifacts."""

from __future__ import annotations

import sqlite3

import pytest

import durable
from durable import RunNotFoundError
from durable.runtime import dispatch_outbox
from durable.runtime._driver import control_of
from durable.store.artifacts._protocol import sha256_of
from tests.conftest import Worlds

SHARED = b"bytes two runs saved"
OWN = b"bytes only the collected run saved"


@durable.tool(outbox=True)
async def notify(to: str) -> str:
    return f"notified {to}"


@durable.workflow
async def busy(name: str) -> str:
    await durable.save_artifact("shared.txt", SHARED)
    await durable.save_artifact("own.txt", OWN + name.encode())
    await durable.recv(topic="go")
    await notify(name)
    return f"done {name}"


@durable.workflow
async def asks(name: str) -> str:
    await durable.save_artifact("shared.txt", SHARED)
    return str(durable.interrupt("approve?"))


@durable.workflow
async def plain(n: int) -> int:
    return n + 1


async def test_gc_removes_every_trace_of_a_collected_run(worlds: Worlds) -> None:
    """After gc: no log, control record, messages, outbox entries or unshared artifacts of the run remain."""
    world = worlds.open()
    h = durable.start_workflow(busy, "g1", world=world, run_id="g1")
    await durable.send("g1", "never read", topic="other", world=world)
    await durable.send("g1", "go", topic="go", world=world)
    assert await h.result() == "done g1"
    await dispatch_outbox(world, timeout=30)
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(asks, "k", world=world, run_id="keep")  # kept: it has not finished
    own_sha = sha256_of(OWN + b"g1")
    shared_sha = sha256_of(SHARED)
    assert world.artifacts.get(own_sha) is not None
    assert world.open_messages().messages("g1") != []
    assert world.open_outbox().entries(run_id="g1") != []

    assert durable.gc(world=world, older_than=0) == ["g1"]

    assert control_of(world).get("g1") is None
    assert world.log.read("g1") == []
    assert world.open_messages().messages("g1") == []
    assert world.open_outbox().entries(run_id="g1") == []
    assert world.artifacts.get(own_sha) is None
    assert world.artifacts.get(shared_sha) == SHARED  # the interrupted run still references it
    with pytest.raises(RunNotFoundError):
        durable.handle("g1", world=world)
    with pytest.raises(RunNotFoundError):
        durable.handle("g1", world=worlds.open())  # another process sees the same


async def test_a_collected_run_id_starts_a_new_run_that_completes(worlds: Worlds) -> None:
    """start_workflow with the id of a collected run starts it afresh and it completes."""
    world = worlds.open()
    assert await durable.start_workflow(plain, 1, world=world, run_id="again").result() == 2
    assert durable.gc(world=world, older_than=0) == ["again"]
    h = durable.start_workflow(plain, 41, world=world, run_id="again")
    assert await h.result() == 42
    assert await h.status() == "completed"


async def test_many_collected_runs_leave_no_control_records(worlds: Worlds) -> None:
    """Collecting many runs leaves none of their control records (runtime.db does not grow forever)."""
    world = worlds.open()
    ids = [f"r{i}" for i in range(60)]
    for rid in ids:
        assert await durable.start_workflow(plain, 1, world=world, run_id=rid).result() == 2
    assert len(control_of(world).records(ids)) == len(ids)
    assert sorted(durable.gc(world=world, older_than=0)) == sorted(ids)
    assert control_of(world).records(ids) == {}
    assert world.runs() == []
    if worlds.kind == "sqlite":
        db = sqlite3.connect(worlds.data_dir / "runtime.db")
        try:
            assert db.execute("SELECT count(*) FROM control").fetchone() == (0,)
        finally:
            db.close()
