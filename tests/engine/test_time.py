"""Deterministic time and randomness: recorded once, replayed after a crash, never really waited for."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import durable
from durable import ConfigurationError, NondeterminismError
from durable.testing import FakeClock, crashing_world
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def crashing(world: durable.World, when: Callable[[str, dict[str, Any]], bool]) -> durable.World:
    return crashing_world(world, crash_before=when)


@durable.step
async def tail() -> int:
    return 0


@durable.step
async def second() -> int:
    return 2


def test_now_reads_the_injected_clock_and_replays_it(worlds: Worlds) -> None:
    """durable.now() is the world's clock at first execution and the same value on every resume."""
    clock = FakeClock(start=1_000_000.0)

    @durable.workflow
    async def wf() -> str:
        stamp = durable.now()
        await tail()
        await second()
        return stamp.isoformat()

    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=crashing(world, on("step.completed", "second")), run_id="r"))
    clock.advance(3600)
    out = run(durable.run_workflow(wf, world=worlds.open(clock=clock.time, sleep=clock.sleep), run_id="r"))
    assert out == datetime.fromtimestamp(1_000_000.0, UTC).isoformat()


def test_uuid4_and_random_replay_after_a_crash(worlds: Worlds) -> None:
    """uuid4() and random() return on resume exactly what the crashed run recorded."""

    @durable.workflow
    async def wf() -> list[str]:
        vals = [str(durable.uuid4()), repr(durable.random())]
        await tail()
        await second()
        return vals

    world = worlds.open()
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=crashing(world, on("step.completed", "second")), run_id="r"))
    recorded = [e.value for e in world.events("r") if e.type == "value.recorded"]  # type: ignore[union-attr]
    out = run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert out[0].replace("-", "") == recorded[0]
    assert float(out[1]) == recorded[1]


def test_helpers_outside_a_run_behave_like_the_standard_library() -> None:
    """Outside a run now() is aware UTC time, uuid4() a version-4 UUID and random() in [0, 1)."""
    assert durable.now().tzinfo is UTC
    assert durable.uuid4().version == 4
    assert 0.0 <= durable.random() < 1.0


def test_sleep_records_its_wake_time_and_sleeps_through_the_world(worlds: Worlds) -> None:
    """durable.sleep(s) writes timer.set with clock + s and sleeps s through the injected sleep."""
    clock = FakeClock(start=500.0)

    @durable.workflow
    async def wf() -> str:
        await durable.sleep(30)
        return "awake"

    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    assert run(durable.run_workflow(wf, world=world, run_id="r")) == "awake"
    timers = [e for e in world.events("r") if e.type == "timer.set"]
    assert [(t.path, t.wake_at) for t in timers] == [("sleep#0", 530.0)]  # type: ignore[union-attr]
    assert clock.slept == [30.0]


@pytest.mark.parametrize(
    ("resume_at", "slept"),
    [(520.0, [10.0]), (10_000.0, [])],
    ids=["20 s into a 30 s sleep", "past the wake time"],
)
def test_resumed_sleep_waits_only_the_remainder(worlds: Worlds, resume_at: float, slept: list[float]) -> None:
    """A run killed during a sleep sleeps only what is left on resume, and nothing once past."""
    clock = FakeClock(start=500.0)

    @durable.workflow
    async def wf() -> str:
        await durable.sleep(30)
        await tail()
        return "awake"

    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=crashing(world, on("step.completed")), run_id="r"))
    clock.now = resume_at
    clock.slept.clear()
    assert (
        run(durable.run_workflow(wf, world=worlds.open(clock=clock.time, sleep=clock.sleep), run_id="r"))
        == "awake"
    )
    assert clock.slept == slept


def test_negative_sleep_counts_as_zero(worlds: Worlds) -> None:
    """durable.sleep(-5) does not call the sleep at all."""
    clock = FakeClock(start=100.0)
    world = worlds.open(clock=clock.time, sleep=clock.sleep)

    @durable.workflow
    async def wf() -> int:
        await durable.sleep(-5)
        return 1

    assert run(durable.run_workflow(wf, world=world, run_id="r")) == 1
    assert clock.slept == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "10", True])
def test_sleep_with_a_bad_duration_raises_and_records_no_timer(world: durable.World, bad: Any) -> None:
    """durable.sleep() with a non-number, NaN or infinity raises ConfigurationError before any timer."""

    @durable.workflow
    async def wf() -> int:
        await durable.sleep(bad)
        return 1

    with pytest.raises(ConfigurationError, match=r"durable\.sleep"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert [e.type for e in world.events("r") if e.type == "timer.set"] == []


def test_code_that_replaces_a_recorded_sleep_raises_nondeterminism(worlds: Worlds) -> None:
    """A resume whose code calls a step where the log recorded a sleep fails closed."""
    clock = FakeClock()
    mode = {"sleep": True}

    @durable.workflow(name="wf")
    async def wf() -> int:
        if mode["sleep"]:
            await durable.sleep(1)
        else:
            await tail()
        await tail_two()
        return 1

    @durable.step
    async def tail_two() -> int:
        return 2

    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=crashing(world, on("step.completed")), run_id="r"))
    mode["sleep"] = False
    with pytest.raises(NondeterminismError, match="sleep"):
        run(durable.run_workflow(wf, world=worlds.open(clock=clock.time, sleep=clock.sleep), run_id="r"))
