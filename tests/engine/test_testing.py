"""The public testing helpers: a crash after any event, and resume-after-every-commit."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from typing import Any

import pytest

import durable
from durable import NondeterminismError, RetryPolicy
from durable.engine._recorded import Recorded
from durable.store import Append
from durable.testing import (
    CrashingLog,
    FakeClock,
    SimulatedCrash,
    crashing_world,
    run_replaying_always,
    run_with_crash,
)
from tests.conftest import Worlds


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def sample_workflow(calls: Counter[str]) -> Any:
    """Steps, a fan-out with tools, a flaky model call with retries and a durable sleep."""

    @durable.step
    async def first(n: int) -> list[int]:
        calls["first"] += 1
        return list(range(1, n + 1))

    @durable.tool(idempotent=True)
    async def lookup(x: int) -> int:
        calls[f"lookup:{x}"] += 1
        return x * x

    @durable.step
    async def square(x: int) -> int:
        calls[f"square:{x}"] += 1
        return await lookup(x)

    @durable.model_call(slot="writer", retry=RetryPolicy(max_attempts=3, backoff=1))
    async def write(total: int) -> str:
        calls["write"] += 1
        if calls["write"] == 1:
            raise ConnectionError("rate limited")
        return f"total {total}"

    @durable.step
    async def summarize(values: list[int]) -> str:
        calls["summarize"] += 1
        return await write(sum(values))

    @durable.workflow(name="sample")
    async def wf(n: int) -> str:
        xs = await first(n)
        values = await durable.parallel("sq", xs, square, key=str)
        await durable.sleep(5)
        return await summarize(values)

    return wf


def label(path: str) -> str:
    """The name a step body counts itself under, from its path."""
    if path.startswith("sq["):
        return "square:" + path[3 : path.index("]")]
    return path


def test_crash_after_every_event_then_resume_gives_the_clean_output(worlds: Worlds) -> None:
    """For every n, a run crashed after n events then resumed ends as a clean run, re-running no commit."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    wf = sample_workflow(calls)
    clean = run(durable.run_workflow(wf, 3, world=world, run_id="clean", models={"writer": "m"}))
    total = len(world.events("clean"))

    for n in range(total):
        rid = f"crash-{n}"
        calls.clear()
        crash = run(run_with_crash(wf, 3, world=world, crash_after=n, run_id=rid, models={"writer": "m"}))
        assert crash.crashed
        assert crash.events_written <= n
        committed = Recorded.from_rows(world.log.read(rid)).steps_completed
        calls.clear()
        assert run(durable.run_workflow(wf, 3, world=world, run_id=rid, models={"writer": "m"})) == clean
        assert [p for p in committed if calls[label(p)]] == []


def test_a_crash_after_zero_events_leaves_no_run(world: durable.World) -> None:
    """crash_after=0 dies before the first append: the run does not exist."""
    crash = run(run_with_crash(sample_workflow(Counter()), 2, world=world, crash_after=0, run_id="r"))
    assert (crash.crashed, crash.events_written) == (True, 0)
    assert world.log.read("r") == []


def test_run_with_crash_returns_the_output_when_the_run_ends_first(worlds: Worlds) -> None:
    """A limit above what the run writes lets it finish, and the output is returned."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    crash = run(
        run_with_crash(sample_workflow(Counter()), 2, world=world, crash_after=10_000, models={"writer": "m"})
    )
    assert (crash.crashed, crash.output) == (False, "total 5")


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_crash_after_must_be_a_count(world: durable.World, bad: Any) -> None:
    """crash_after takes an int >= 0."""
    with pytest.raises(durable.ConfigurationError, match="crash_after"):
        run(run_with_crash(sample_workflow(Counter()), 2, world=world, crash_after=bad))


def test_a_crash_never_splits_a_transaction(world: durable.World) -> None:
    """When the limit falls inside an append, none of that append is written."""
    log = CrashingLog(world.log, max_events=2)
    world.log.fence("r")
    rows = [(1, "a", "{}"), (2, "b", "{}"), (3, "c", "{}")]
    with pytest.raises(SimulatedCrash):
        log.append([Append("r", rows, 1, created=("wf", None))])
    assert world.log.read("r") == []
    with pytest.raises(SimulatedCrash):
        log.append([Append("r", rows[:1], 1, created=("wf", None))])


def test_replaying_always_gives_the_clean_output(worlds: Worlds) -> None:
    """A run resumed from its log after every commit ends with the clean run's output."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    wf = sample_workflow(Counter())
    clean = run(durable.run_workflow(wf, 3, world=world, run_id="clean", models={"writer": "m"}))
    commits = sum(1 for e in world.events("clean") if e.type == "step.completed")

    result = run(run_replaying_always(wf, 3, world=world, run_id="r", models={"writer": "m"}))
    assert result.output == clean
    assert result.resumes >= commits


def test_replaying_always_exposes_state_the_log_does_not_record(world: durable.World) -> None:
    """A workflow that reads a process counter replays differently and fails with NondeterminismError."""
    counter = itertools.count()

    @durable.step(max_visits=5)
    async def record(i: int) -> int:
        return i

    @durable.workflow
    async def wf() -> int:
        await record(next(counter))
        return await record(next(counter))

    with pytest.raises(NondeterminismError):
        run(run_replaying_always(wf, world=world, run_id="r"))


def test_fake_clock_advances_when_slept_on_and_remembers_each_sleep() -> None:
    """FakeClock.sleep moves time forward at once and keeps a list of the durations."""
    clock = FakeClock(start=10.0)
    run(clock.sleep(2.5))
    clock.advance(1)
    assert (clock.time(), clock.slept) == (13.5, [2.5])


def test_crash_before_a_chosen_event_writes_nothing_of_its_append(world: durable.World) -> None:
    """crash_before dies before the append holding the matching event; earlier appends stay."""
    calls: Counter[str] = Counter()
    wf = sample_workflow(calls)
    doomed = crashing_world(world, crash_before=lambda t, d: t == "step.completed")
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, 3, world=doomed, run_id="r"))
    written = [e.type for e in world.events("r")]
    assert "step.completed" not in written
    assert written[0] == "run.started"
    assert doomed.log.crashed  # type: ignore[attr-defined]
