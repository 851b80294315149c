"""Every event of a run says when its log committed it, on every backend."""

from __future__ import annotations

import asyncio
import time

import durable
from tests.conftest import Worlds


@durable.step
async def first(x: int) -> int:
    return x + 1


@durable.step
async def second(x: int) -> int:
    return x * 2


@durable.workflow
async def timed(x: int) -> int:
    a = await first(x)
    await asyncio.sleep(0.05)  # the first step's commit lands before the second step runs
    return await second(a)


def test_events_carry_the_time_they_were_committed(worlds: Worlds) -> None:
    """``at`` is set on every event, within the run's wall time, and never goes back with seq."""
    world = worlds.open()
    before = time.time()
    assert asyncio.run(durable.run_workflow(timed, 1, world=world, run_id="t")) == 4
    after = time.time()
    events = world.events("t")
    times = [e.at for e in events]
    assert None not in times, [e.type for e in events if e.at is None]
    stamped = [t for t in times if t is not None]
    slack = 2.0  # a Postgres server stamps with its own clock
    assert before - slack <= stamped[0] and stamped[-1] <= after + slack
    assert stamped == sorted(stamped)
    at = {e.path: e.at for e in events if e.type == "step.completed"}  # type: ignore[union-attr]
    assert at["first"] is not None and at["second"] is not None
    assert at["first"] < at["second"]  # committed 50 ms apart, not stamped when read


def test_a_resumed_run_keeps_the_times_of_its_first_drive(worlds: Worlds) -> None:
    """Reading the log again, or resuming, does not restamp what was committed before."""
    world = worlds.open()
    asyncio.run(durable.run_workflow(timed, 1, world=world, run_id="t"))
    first_read = [(e.seq, e.at) for e in world.events("t")]
    again = worlds.open()
    assert asyncio.run(durable.run_workflow(timed, 1, world=again, run_id="t")) == 4
    assert [(e.seq, e.at) for e in again.events("t")][: len(first_read)] == first_read
