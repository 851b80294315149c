"""The outbox on both backends: a call committed with its entry, dispatched after, retried, dead-lettered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable import ConfigurationError, OutboxRef, RetryPolicy
from durable.cli import main
from durable.runtime import OutboxDispatcher, dispatch_outbox
from tests.conftest import Worlds
from tests.helpers import pg

SENT: list[tuple[str, str]] = []
FAILS: dict[str, int] = {}


@durable.tool(outbox=True, retry=RetryPolicy(max_attempts=3, backoff=0))
async def email(to: str, body: str) -> str:
    key = durable.idempotency_key()
    if FAILS.get(to, 0) > 0:
        FAILS[to] -= 1
        raise ConnectionError(f"smtp down for {to}")
    SENT.append((key, to))
    return f"queued:{to}"


@durable.workflow
async def order(to: str) -> dict[str, Any]:
    ref = await email(to, "thanks")
    assert isinstance(ref, OutboxRef)
    return {"key": ref.key, "tool": ref.tool}


@pytest.fixture(autouse=True)
def _reset() -> None:
    SENT.clear()
    FAILS.clear()


async def test_an_outbox_call_returns_its_ref_at_once_and_a_dispatcher_delivers_it(worlds: Worlds) -> None:
    """The run records intent and receipt with the entry; the body runs later with the same key."""
    world = worlds.open()
    out = await durable.run_workflow(order, "ada@example.com", world=world, run_id="o1")
    assert out == {"key": "o1:tool:email#0", "tool": "email"}
    assert SENT == []  # the run did not call the body
    assert [e.type for e in world.events("o1")] == [
        "run.started",
        "effect.intent",
        "effect.receipt",
        "run.completed",
    ]
    store = world.open_outbox()
    assert [(e.key, e.state, e.attempts) for e in store.entries()] == [("o1:tool:email#0", "pending", 0)]
    await dispatch_outbox(world, timeout=30)
    assert SENT == [("o1:tool:email#0", "ada@example.com")]
    entry = store.get("o1:tool:email#0")
    assert entry is not None and (entry.state, entry.attempts, entry.result) == (
        "delivered",
        1,
        '"queued:ada@example.com"',
    )


async def test_a_replay_returns_the_recorded_ref_and_enqueues_nothing_new(worlds: Worlds) -> None:
    """Resuming the finished run gives back the same OutboxRef; the outbox still holds one entry."""
    world = worlds.open()
    first = await durable.run_workflow(order, "b@example.com", world=world, run_id="o2")
    again = await durable.run_workflow(order, "b@example.com", world=worlds.open(), run_id="o2")
    assert first == again
    assert len(world.open_outbox().entries()) == 1


async def test_a_failing_call_is_retried_with_the_same_key(worlds: Worlds) -> None:
    """Two failures and a success: three attempts, one delivery, one key."""
    world = worlds.open()
    FAILS["c@example.com"] = 2
    await durable.run_workflow(order, "c@example.com", world=world, run_id="o3")
    await dispatch_outbox(world, timeout=30)
    entry = world.open_outbox().get("o3:tool:email#0")
    assert entry is not None and (entry.state, entry.attempts) == ("delivered", 3)
    assert SENT == [("o3:tool:email#0", "c@example.com")]


async def test_a_poison_entry_lands_in_the_dead_letter_and_retry_re_drives_it(worlds: Worlds) -> None:
    """An entry that fails every attempt of its policy is dead; `little outbox retry` puts it back."""
    world = worlds.open()
    FAILS["d@example.com"] = 99
    await durable.run_workflow(order, "d@example.com", world=world, run_id="o4")
    await dispatch_outbox(world, timeout=30)
    store = world.open_outbox()
    dead = store.entries("dead")
    assert [(e.key, e.attempts) for e in dead] == [("o4:tool:email#0", 3)]
    assert dead[0].error is not None and "ConnectionError: smtp down" in dead[0].error
    assert SENT == []
    FAILS.clear()
    assert store.retry_dead("o4:tool:email#0", world.clock()) is not None
    await dispatch_outbox(world, timeout=30)
    assert SENT == [("o4:tool:email#0", "d@example.com")]
    assert store.entries("dead") == []


async def test_an_entry_whose_dispatcher_died_is_re_driven_by_the_next_pass(worlds: Worlds) -> None:
    """An attempt was counted but its dispatcher is gone (its lock is free): the next pass calls it again."""
    world = worlds.open()
    await durable.run_workflow(order, "e@example.com", world=world, run_id="o5")
    store = world.open_outbox()
    assert store.start_attempt("o5:tool:email#0", "a-dead-worker", world.clock()) is not None
    async with durable.Worker(world, workflows=[order]):
        for _ in range(10_000):
            if SENT:
                break
            await asyncio.sleep(0.002)
    entry = store.get("o5:tool:email#0")
    assert entry is not None and (entry.state, entry.attempts) == ("delivered", 2)
    assert SENT == [("o5:tool:email#0", "e@example.com")]


async def test_an_entry_held_by_a_live_dispatcher_is_left_to_it(worlds: Worlds) -> None:
    """While another dispatcher holds an entry's lock, a pass does not call it."""
    world = worlds.open()
    await durable.run_workflow(order, "f@example.com", world=world, run_id="o6")
    held = world.locks.try_acquire("outbox:o6:tool:email#0")
    assert held is not None
    d = OutboxDispatcher(world, "other")
    assert d.dispatch_pass() == 0
    world.locks.release(held)
    assert d.dispatch_pass() == 1
    await d.stop()
    assert SENT == [("o6:tool:email#0", "f@example.com")]


async def test_a_fenced_driver_enqueues_nothing(worlds: Worlds) -> None:
    """The entry and the run's events commit together: when the append is refused, no entry exists."""
    world = worlds.open()

    @durable.workflow(name="fenced_order")
    async def fenced(to: str) -> Any:
        world.log.fence("fenced")  # another driver takes the run over before the call
        return await email(to, "x")

    with pytest.raises(durable.FencedError):
        await durable.run_workflow(fenced, "g@example.com", world=world, run_id="fenced")
    assert world.open_outbox().entries() == []


def test_outbox_needs_an_async_tool_without_reconcile() -> None:
    """The decorator refuses a sync body and reconcile= with outbox=True."""
    with pytest.raises(ConfigurationError, match="async def"):

        @durable.tool(outbox=True)
        def sync_tool(x: int) -> int:
            return x

    with pytest.raises(ConfigurationError, match="reconcile"):

        @durable.tool(outbox=True, reconcile=lambda k, i: None)
        async def reconciled(x: int) -> int:
            return x


def test_little_outbox_lists_and_retries_dead_entries(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little outbox` shows pending entries, `--dead` the dead letter, `retry KEY` re-drives one."""
    data = tmp_path / "data"
    world = durable.local_world(data)
    FAILS["h@example.com"] = 99
    asyncio.run(durable.run_workflow(order, "h@example.com", world=world, run_id="o7"))
    assert main(["outbox", "--data-dir", str(data)]) == 0
    assert "o7:tool:email#0" in capsys.readouterr().out
    asyncio.run(dispatch_outbox(world, timeout=30))
    assert main(["outbox", "--dead", "--data-dir", str(data)]) == 0
    assert "dead" in capsys.readouterr().out
    assert main(["outbox", "retry", "o7:tool:email#0", "--data-dir", str(data)]) == 0
    assert "pending" in capsys.readouterr().out
    assert main(["outbox", "retry", "o7:tool:email#0", "--data-dir", str(data)]) == 1
    assert "not in the dead letter" in capsys.readouterr().err
    world.close()


def test_little_outbox_with_dsn_lists_and_retries_a_postgres_worlds_entries(
    pg_server: pg.Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little outbox --dsn` reads the world's outbox table and re-drives a dead entry."""
    schema = pg.new_schema()
    where = ["--dsn", pg_server.dsn, "--schema", schema]
    try:
        with durable.postgres_world(pg_server.dsn, schema=schema) as world:
            FAILS["p@example.com"] = 99
            asyncio.run(durable.run_workflow(order, "p@example.com", world=world, run_id="o9"))
            assert main(["outbox", *where]) == 0
            assert "o9:tool:email#0" in capsys.readouterr().out
            asyncio.run(dispatch_outbox(world, timeout=30))
            assert main(["outbox", "--dead", *where]) == 0
            assert "dead" in capsys.readouterr().out
            assert main(["outbox", "retry", "o9:tool:email#0", *where]) == 0
            FAILS.clear()
            asyncio.run(dispatch_outbox(world, timeout=30))
            entry = world.open_outbox().get("o9:tool:email#0")
            assert entry is not None and entry.state == "delivered"
            assert SENT == [("o9:tool:email#0", "p@example.com")]
    finally:
        pg.drop_schema(pg_server.dsn, schema)
