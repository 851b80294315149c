"""Scopes for framework callbacks: keyed scopes entered again, sessions held open from sync code."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import durable
from durable.engine import hold_session, keyed
from durable.engine._recorded import Recorded
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


def keys(world: durable.World, run_id: str) -> list[str]:
    return [k for k in Recorded.from_rows(world.log.read(run_id)).receipts]


def test_a_keyed_scope_entered_again_numbers_its_calls_on(worlds: Worlds) -> None:
    """Calls of one key get ``name[key]`` paths numbered across uses, whatever ran in between."""
    calls: Counter[str] = Counter()

    @durable.tool(idempotent=True)
    async def note(what: str) -> str:
        calls[what] += 1
        return what

    @durable.workflow
    async def chat() -> list[str]:
        out = []
        for what in ("a1", "b1", "a2"):
            with keyed("store", what[0]):
                out.append(await note(what))
        return out

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(chat, world=world, run_id="r")) == ["a1", "b1", "a2"]
    assert keys(world, "r") == ["store[a].tool:note#0", "store[b].tool:note#0", "store[a].tool:note#1"]
    assert asyncio.run(durable.run_workflow(chat, world=worlds.open(), run_id="r")) == ["a1", "b1", "a2"]
    assert calls == Counter({"a1": 1, "b1": 1, "a2": 1})


def test_a_keyed_scope_outside_a_run_changes_nothing() -> None:
    """Outside a run ``keyed`` yields ``None`` and the calls are plain calls."""

    @durable.tool
    async def note(what: str) -> str:
        return what

    async def main() -> str:
        with keyed("store", "a") as scope:
            assert scope is None
            return await note("x")

    assert asyncio.run(main()) == "x"


def test_a_session_held_from_sync_code_runs_its_calls_in_a_task_and_replays(worlds: Worlds) -> None:
    """``hold_session`` records the session at once; a task in its scope makes its calls; a resume replays."""
    calls: Counter[str] = Counter()

    @durable.tool(idempotent=True)
    async def step(n: int) -> int:
        calls[f"step-{n}"] += 1
        return n * 10

    def start() -> asyncio.Task[int]:  # what a framework's sync entry point does
        held = hold_session("streamer")
        assert held is not None

        async def loop() -> int:
            try:
                total = 0
                for n in range(2):
                    total += await step(n)
            except BaseException as exc:
                held.close(exc)
                raise
            held.close()
            return total

        with held.current():
            return asyncio.get_running_loop().create_task(loop())

    @durable.workflow
    async def wf() -> int:
        task = start()
        return await task + await step(7)

    world = worlds.open()
    assert asyncio.run(durable.run_workflow(wf, world=world, run_id="r")) == 80
    assert keys(world, "r") == [
        "session:streamer#0.tool:step#0",
        "session:streamer#0.tool:step#1",
        "tool:step#1",
    ]
    types = [e.type for e in world.events("r")]
    assert types.count("session.started") == 1 and types.count("session.completed") == 1
    assert asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="r")) == 80
    assert calls == Counter({"step-0": 1, "step-1": 1, "step-7": 1})


def test_a_held_session_s_manifest_is_durable_before_it_returns(worlds: Worlds) -> None:
    """A crash right after ``hold_session`` leaves the session recorded; the resume checks it and goes on."""

    @durable.tool(idempotent=True)
    async def step(n: int) -> int:
        return n

    @durable.workflow
    async def wf() -> int:
        held = hold_session("streamer", tools=[step])
        assert held is not None
        with held.current():
            out = await step(1)
        held.close()
        return out

    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, world=worlds.crashing(on("effect.intent")), run_id="r"))
    world = worlds.open()
    assert "session.started" in [e.type for e in world.events("r")]
    assert asyncio.run(durable.run_workflow(wf, world=world, run_id="r")) == 1


def test_hold_session_outside_a_run_is_none() -> None:
    """Outside a run there is nothing to hold."""
    assert hold_session("streamer") is None
