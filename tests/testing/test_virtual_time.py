"""virtual_time(): long waits run in a moment, and the log is the one a real clock writes."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

import durable
from durable import Worker
from durable._clock import VirtualClock
from durable.testing import virtual_time
from tests.conftest import Worlds

DAY = 86400.0


@durable.workflow
async def napping(seconds: float) -> str:
    before = durable.now()
    await durable.sleep(seconds)
    return f"slept {(durable.now() - before).total_seconds():.0f}"


@durable.workflow
async def waiting(seconds: float) -> Any:
    return await durable.recv("go", timeout=seconds)


@durable.workflow
async def ticked(x: int) -> int:
    return x


def shape(world: durable.World, run_id: str) -> list[tuple[str, Any]]:
    """The run's events without their timestamps and seconds: what must match a real-clock run."""
    out = []
    for e in world.events(run_id):
        data = e.model_dump(exclude={"at", "wake_at", "run_id", "seq", "deadline_at", "input", "input_hash"})
        data.pop("output", None), data.pop("output_hash", None)
        out.append((e.type, sorted(k for k in data)))
    return out


def test_a_month_of_durable_sleep_runs_in_seconds_with_the_log_of_a_real_clock(
    worlds: Worlds, clock: VirtualClock
) -> None:
    """A 30-day durable.sleep ends at once; its log is a real 0.2 s sleep's, with stamps 30 days apart."""
    world = worlds.open()
    started = time.monotonic()
    out = asyncio.run(durable.run_workflow(napping, 30 * DAY, world=world, run_id="month"))
    wall = time.monotonic() - started
    assert out == f"slept {30 * DAY:.0f}"
    assert wall < 10 and clock.skipped >= 30 * DAY - 1
    events = world.events("month")
    assert events[-1].at - events[0].at == pytest.approx(30 * DAY, abs=1)
    timer = next(e for e in events if e.type == "timer.set")
    assert timer.wake_at - timer.at == pytest.approx(30 * DAY, abs=0.01)
    real = worlds.open()
    with _real():  # the same run on the real clock, short
        asyncio.run(durable.run_workflow(napping, 0.2, world=real, run_id="short"))
    assert shape(world, "month") == shape(real, "short")
    short_timer = next(e for e in real.events("short") if e.type == "timer.set")
    assert short_timer.wake_at - short_timer.at == pytest.approx(0.2, abs=0.01)


class _real:
    """No virtual clock in this block (the test's clock is set aside)."""

    def __enter__(self) -> None:
        from durable._clock import VIRTUAL

        self.token = VIRTUAL.set(None)

    def __exit__(self, *exc: object) -> None:
        from durable._clock import VIRTUAL

        VIRTUAL.reset(self.token)


def test_a_week_long_recv_timeout_runs_in_seconds_with_the_log_of_a_real_clock(
    worlds: Worlds, clock: VirtualClock
) -> None:
    """recv(timeout=7 days) returns None at once, a week later in the log, as a real 0.2 s one does."""
    world = worlds.open()
    started = time.monotonic()
    assert asyncio.run(durable.run_workflow(waiting, 7 * DAY, world=world, run_id="week")) is None
    assert time.monotonic() - started < 10
    events = world.events("week")
    assert events[-1].at - events[0].at == pytest.approx(7 * DAY, abs=1)
    real = worlds.open()
    with _real():
        assert asyncio.run(durable.run_workflow(waiting, 0.2, world=real, run_id="short")) is None
    assert shape(world, "week") == shape(real, "short")


def test_a_message_before_the_timeout_is_received_at_its_virtual_time(
    worlds: Worlds, clock: VirtualClock
) -> None:
    """A message sent after three virtual days reaches a run waiting a week, three days after it began."""
    world = worlds.open()

    async def go() -> Any:
        h = durable.start_workflow(waiting, 7 * DAY, world=world, run_id="early")
        await asyncio.sleep(3 * DAY)
        await h.send("hello", topic="go")
        return await h.result(timeout=8 * DAY)

    assert asyncio.run(go()) == "hello"
    events = world.events("early")
    assert events[-1].at - events[0].at == pytest.approx(3 * DAY, abs=5)


def _tick_runs(world: durable.World, name: str = "hourly") -> list[str]:
    return sorted(r.run_id for r in world.runs() if r.run_id.startswith(f"schedule:{name}:"))


async def _completed_ticks(world: durable.World, name: str, n: int, *, pause: float) -> None:
    """Wait until the first ``n`` tick runs of the schedule ``name`` completed (the caller bounds it)."""
    while True:
        runs = _tick_runs(world, name)[:n]
        if len(runs) == n and all(world.log.info(r).status == "completed" for r in runs):
            return
        await asyncio.sleep(pause)


def test_48_hourly_schedule_ticks_run_in_seconds_like_ticks_on_a_real_clock(
    worlds: Worlds, clock: VirtualClock
) -> None:
    """A worker starts 48 hourly runs in 48 virtual hours, each at its tick, as a real 1 s schedule does."""
    world = worlds.open()
    hourly = durable.Schedule("hourly", ticked, every=3600, input=1, catch_up="all")

    async def go() -> None:
        async with Worker(world, workflows=[ticked], schedules=[hourly]):
            async with asyncio.timeout(49 * 3600):
                await _completed_ticks(world, "hourly", 48, pause=60)

    started = time.monotonic()
    asyncio.run(go())
    assert time.monotonic() - started < 60
    ticks = _tick_runs(world)[:48]
    assert len(ticks) == 48
    first = [world.events(r)[0].at for r in ticks]
    assert [round(b - a) for a, b in itertools.pairwise(first)] == [3600] * 47
    real = worlds.open()
    fast = durable.Schedule("fast", ticked, every=1, input=1, catch_up="all")

    async def short() -> None:
        async with Worker(real, workflows=[ticked], schedules=[fast]):
            async with asyncio.timeout(30):
                await _completed_ticks(real, "fast", 2, pause=0.05)

    with _real():
        asyncio.run(short())
    fast_ticks = _tick_runs(real, "fast")
    assert shape(world, ticks[0]) == shape(real, fast_ticks[0]) == shape(real, fast_ticks[1])
    fast_first = [real.events(r)[0].at for r in fast_ticks[:2]]
    assert fast_first[1] - fast_first[0] == pytest.approx(1, abs=0.5)


def test_a_poll_that_would_end_after_a_due_time_ends_at_it(clock: VirtualClock) -> None:
    """A poller whose poll outlasts a due time looks at that time, not at the next timer the clock jumps to.

    A worker polls between its passes and sets a due time at the next schedule tick; if its poll
    began just before the tick, the clock must not jump past the tick to another task's timer.
    """
    from durable._clock import due_at, poll_sleep, wall

    async def go() -> float:
        elsewhere = asyncio.ensure_future(asyncio.sleep(60))  # a timer the clock jumps to next
        began = wall()
        due = due_at(began + 0.2)
        await poll_sleep(0.5)
        looked = wall() - began
        due.cancel()
        elsewhere.cancel()
        return looked

    assert asyncio.run(go()) == pytest.approx(0.2, abs=0.05)


def test_without_virtual_time_durable_reads_the_real_clock() -> None:
    """Outside virtual_time(), the world's clock is the real one."""
    world = durable.memory_world()
    assert abs(world.clock() - time.time()) < 5


def test_entered_in_a_running_loop_it_takes_the_loop_at_once() -> None:
    """Inside a running loop, virtual_time() makes a plain hour-long asyncio.sleep jump, then lets go."""

    async def go() -> tuple[float, float]:
        with virtual_time() as clock:
            before = durable.memory_world().clock()
            await asyncio.sleep(3600)
            inside = durable.memory_world().clock() - before
        return inside, clock.skipped

    inside, skipped = asyncio.run(go())
    assert inside == pytest.approx(3600, abs=1) and skipped >= 3599


def test_a_context_without_the_clock_reads_the_real_time(clock: VirtualClock) -> None:
    """The clock belongs to its context: a context copied before it was set reads the real clock."""
    import contextvars

    from durable._clock import VIRTUAL

    token = VIRTUAL.set(None)
    other = contextvars.copy_context()
    VIRTUAL.reset(token)

    async def jump() -> None:
        durable.memory_world().clock()  # durable's first reading takes the loop
        await asyncio.sleep(3600)

    asyncio.run(jump())
    assert clock.skipped >= 3599
    assert abs(durable.memory_world().clock() - time.time() - clock.skipped) < 5
    assert other.run(lambda: abs(durable.memory_world().clock() - time.time()) < 5)
