"""The memory store inside runs: effects, recorded searches, embedder drift, on both backends."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import durable
from durable import CapabilityDriftError, RunInterrupted
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def types(world: durable.World, run_id: str) -> list[str]:
    return [e.type for e in world.events(run_id)]


def test_put_inside_a_run_is_an_effect(world: durable.World) -> None:
    """A put inside a run writes an intent before the item and a receipt after it."""
    mem = world.memory.configure(durable.lexical_embedder(dim=32))

    @durable.workflow
    async def remember(fact: str) -> None:
        await mem.put(("facts",), "f1", fact)

    run(durable.run_workflow(remember, "tea is green", world=world, run_id="r"))
    events = world.events("r")
    intent = next(e for e in events if e.type == "effect.intent")
    assert (intent.name, intent.kind, intent.key) == ("memory_put", "tool", "tool:memory_put#0")
    assert types(world, "r") == ["run.started", "effect.intent", "effect.receipt", "run.completed"]
    assert run(mem.get(("facts",), "f1")).text == "tea is green"  # type: ignore[union-attr]


def test_replay_sees_the_hits_the_run_saw(world: durable.World) -> None:
    """A resumed run gets its recorded search hits even after the memory changed."""
    mem = world.memory.configure(durable.lexical_embedder(dim=64))
    run(mem.put(("notes",), "old", "the cat sat on the mat"))

    @durable.workflow
    async def recall(query: str) -> list[str]:
        hits = await mem.search(("notes",), query, k=3)
        durable.interrupt("continue?")
        return [h.key for h in hits]

    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(recall, "cat", world=world, run_id="r"))
    run(mem.delete(("notes",), "old"))
    run(mem.put(("notes",), "new", "cat cat cat"))
    out = run(durable.run_workflow(recall, "cat", world=world, run_id="r", resume="yes"))
    assert out == ["old"]
    assert [h.key for h in run(mem.search(("notes",), "cat"))] == ["new"]


def test_replayed_put_does_not_write_again(world: durable.World) -> None:
    """A put the log confirms is not made again on resume, whatever the store holds now."""
    mem = world.memory.configure(durable.lexical_embedder(dim=32))

    @durable.workflow
    async def wf(text: str) -> None:
        await mem.put(("n",), "k", text)
        durable.interrupt("go on?")

    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, "first words", world=world, run_id="r"))
    run(mem.delete(("n",), "k"))
    run(durable.run_workflow(wf, "first words", world=world, run_id="r", resume="ok"))
    assert run(mem.get(("n",), "k")) is None


def test_put_cut_before_its_receipt_is_redriven(worlds: Worlds) -> None:
    """A put whose receipt never reached the log runs again on resume and leaves one item."""
    stores: dict[str, durable.MemoryStore] = {}

    @durable.workflow
    async def wf(text: str) -> int:
        await stores["now"].put(("n",), "k", text)
        return int(await stores["now"].count())

    first = worlds.crashing(on("effect.receipt", "memory_put"))
    stores["now"] = first.memory.configure(durable.lexical_embedder(dim=32))
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, "some words", world=first, run_id="r"))
    assert run(stores["now"].count()) == 1  # the write happened; only its receipt was lost
    second = worlds.open()
    if worlds.kind == "memory":  # an in-process store stands in for the surviving files
        second.memory_store = stores["now"]
    stores["now"] = second.memory.configure(durable.lexical_embedder(dim=32))
    assert run(durable.run_workflow(wf, "some words", world=second, run_id="r")) == 1
    events = second.events("r")
    assert [e.key for e in events if e.type == "effect.intent"] == [
        "tool:memory_put#0",
        "tool:memory_count#1",
    ]
    assert [e.key for e in events if e.type == "effect.receipt"] == [
        "tool:memory_put#0",
        "tool:memory_count#1",
    ]


def test_search_and_reads_inside_a_run_are_recorded(world: durable.World) -> None:
    """get, search, count and namespaces inside a run each leave an intent and a receipt."""
    mem = world.memory.configure(durable.lexical_embedder(dim=32))
    run(mem.put(("n",), "k", "hello world"))

    @durable.workflow
    async def wf() -> list[str]:
        await mem.get(("n",), "k")
        await mem.search(("n",), "hello")
        await mem.count()
        await mem.namespaces()
        return []

    run(durable.run_workflow(wf, world=world, run_id="r"))
    names = [e.name for e in world.events("r") if e.type == "effect.intent"]
    assert names == ["memory_get", "memory_search", "memory_count", "memory_namespaces"]


def test_model_call_embedder_is_replayed_not_recomputed(world: durable.World) -> None:
    """An embedder that is a @model_call is recorded once and replayed on resume."""
    calls: Counter[str] = Counter()
    lexical = durable.lexical_embedder(dim=32)

    @durable.model_call
    async def embed(texts: list[str]) -> list[list[float]]:
        calls["embed"] += 1
        return await lexical.embed(texts)

    mem = world.memory.configure(durable.Embedder(embed, dim=32, name="test-embedder"))

    @durable.workflow
    async def wf(text: str) -> list[str]:
        await mem.put(("n",), "k", text)
        hits = await mem.search(("n",), text)
        durable.interrupt("more?")
        return [h.key for h in hits]

    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, "green tea", world=world, run_id="r"))
    assert calls["embed"] == 2
    assert run(durable.run_workflow(wf, "green tea", world=world, run_id="r", resume=1)) == ["k"]
    assert calls["embed"] == 2
    models = [e.name for e in world.events("r") if e.type == "effect.intent" and e.kind == "model"]
    assert models == ["embed", "embed"]


def test_memory_calls_inside_a_tool_are_part_of_that_tool(world: durable.World) -> None:
    """Inside a @tool body the store is used directly; the tool's own receipt covers it."""
    mem = world.memory.configure(durable.lexical_embedder(dim=32))

    @durable.tool(idempotent=True)
    async def remember(fact: str) -> int:
        await mem.put(("facts",), fact.split()[0], fact)
        return len(await mem.search(("facts",), fact))

    @durable.workflow
    async def wf(fact: str) -> int:
        return await remember(fact)

    assert run(durable.run_workflow(wf, "tea is green", world=world, run_id="r")) == 1
    names = [e.name for e in world.events("r") if e.type == "effect.intent"]
    assert names == ["remember"]


def test_manifest_records_the_embedder(world: durable.World) -> None:
    """run.started records the embedder's name, dimension and the store's metric."""
    world.memory.configure(durable.lexical_embedder(dim=48), metric="l2")

    @durable.workflow
    async def wf() -> int:
        return 1

    run(durable.run_workflow(wf, world=world, run_id="r"))
    started = world.events("r")[0]
    assert started.manifest["memory"] == {  # type: ignore[attr-defined]
        "embedder": "durable.lexical_hash_v1",
        "dim": 48,
        "metric": "l2",
    }


def test_resume_under_another_embedder_is_drift(worlds: Worlds) -> None:
    """Resuming a run with an embedder of another name fails closed before anything runs."""
    calls: Counter[str] = Counter()
    first = worlds.open()
    first.memory.configure(durable.lexical_embedder(dim=16))

    @durable.workflow
    async def wf() -> int:
        calls["body"] += 1
        durable.interrupt("wait")
        return 1

    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, world=first, run_id="r"))
    second = worlds.open()
    other = durable.Embedder(lambda texts: [[1.0] * 16 for _ in texts], dim=16, name="other-model")
    if worlds.kind == "sqlite":
        first.close()
    second.memory.configure(other)
    with pytest.raises(CapabilityDriftError, match=r"memory\.embedder") as info:
        run(durable.run_workflow(wf, world=second, run_id="r", resume="x"))
    assert [c.key for c in info.value.changes] == ["memory.embedder"]
    assert calls["body"] == 1


def test_memory_effects_are_durables_own_not_undescribed_capabilities(world: durable.World) -> None:
    """Every memory effect name is listed as durable's own, so verify does not flag it as undescribed."""
    from durable.engine._drift import OWN_EFFECTS, undescribed
    from durable.engine._recorded import Recorded
    from durable.engine._spec import spec_of

    names = {
        spec.name for spec in (spec_of(v) for v in vars(durable.MemoryStore).values()) if spec is not None
    }
    assert names == {
        "memory_put",
        "memory_delete",
        "memory_get",
        "memory_search",
        "memory_namespaces",
        "memory_count",
    }
    assert {f"tools.{n}" for n in names} <= OWN_EFFECTS
    mem = world.memory.configure(durable.lexical_embedder(dim=16))

    @durable.workflow
    async def wf() -> int:
        await mem.put(("n",), "k", "some words")
        return len(await mem.search(("n",), "words"))

    run(durable.run_workflow(wf, world=world, run_id="r"))
    rec = Recorded.from_rows(world.log.read("r"), "r")
    assert undescribed(rec.started["manifest"], rec) == []  # type: ignore[index]
