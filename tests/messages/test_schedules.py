"""Schedules on both backends: tick ids, cron and intervals, catch-up modes, world.schedules, workers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import durable
from durable import ConfigurationError, Schedule
from durable.cli import main
from durable.runtime import schedule_pass, tick_id, ticks
from durable.store import ScheduleRecord
from tests.conftest import Worlds
from tests.helpers.waiting import until

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC).timestamp()


@durable.workflow
async def nightly(label: str) -> str:
    return f"ran {label}"


def clocked(worlds: Worlds, start: float) -> tuple[durable.World, list[float]]:
    now = [start]
    return worlds.open(clock=lambda: now[0]), now


def tick_runs(world: durable.World) -> list[str]:
    from durable.runtime._driver import control_of

    ctl = control_of(world)
    return sorted(r.run_id for r in ctl.claimed() + ctl.unstarted() if r.run_id.startswith("schedule:"))


def test_a_ticks_run_id_is_the_schedule_and_the_tick_in_iso_utc_to_the_second() -> None:
    """The id names the schedule and the tick, so every worker computes the same one."""
    assert tick_id("nightly", T0) == "schedule:nightly:2026-12-01T03:00:00Z"


def test_interval_ticks_are_aligned_to_the_epoch() -> None:
    """every= ticks at multiples of the interval, strictly after the start and up to the end."""
    rec = ScheduleRecord("s", "wf", every=60.0)
    assert list(ticks(rec, T0 - 1, T0 + 120)) == [T0, T0 + 60, T0 + 120]
    assert list(ticks(rec, T0, T0 + 59)) == []


def test_cron_ticks_follow_the_schedules_timezone_across_daylight_saving() -> None:
    """03:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer."""
    rec = ScheduleRecord("s", "wf", cron="0 3 * * *", timezone="Europe/Berlin")
    march = datetime(2026, 3, 28, 12, tzinfo=UTC).timestamp()
    got = [
        datetime.fromtimestamp(t, UTC).strftime("%m-%d %H:%M") for t in ticks(rec, march, march + 2 * 86400)
    ]
    assert got == ["03-29 01:00", "03-30 01:00"]
    winter = [datetime.fromtimestamp(t, UTC).hour for t in ticks(rec, T0, T0 + 86400)]
    assert winter == [2]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of cron= and every="),
        ({"cron": "0 3 * * *", "every": 60}, "exactly one"),
        ({"cron": "61 * * * *"}, "not a cron expression"),
        ({"every": 0.5}, "whole number of seconds"),
        ({"every": 60, "timezone": "Mars/Olympus"}, "IANA zone"),
        ({"every": 60, "catch_up": "some"}, "catch_up="),
    ],
)
def test_a_bad_schedule_is_refused_when_it_is_made(kwargs: dict[str, Any], match: str) -> None:
    """Mistakes surface at construction, not at 3 a.m."""
    with pytest.raises(ConfigurationError, match=match):
        Schedule("s", nightly, input="x", **kwargs)


def test_a_schedule_name_cannot_hold_a_colon() -> None:
    """The name is part of the run id."""
    with pytest.raises(ConfigurationError, match="name"):
        Schedule("a:b", nightly, every=60, input="x")


@pytest.mark.parametrize(("mode", "started"), [("latest", 1), ("all", 5), ("none", 0)])
def test_catch_up_decides_what_starts_for_ticks_missed_while_no_worker_ran(
    worlds: Worlds, mode: str, started: int
) -> None:
    """Five ticks passed, the last one 90 s ago: latest starts it, all starts all five, none starts none."""
    world, now = clocked(worlds, T0 + 1)
    world.schedules.create(Schedule("s", nightly, every=300, input="x", catch_up=mode))
    assert schedule_pass(world, ["nightly"], now[0]) == []  # a new schedule starts from now
    now[0] = T0 + 5 * 300 + 90
    ids = schedule_pass(world, ["nightly"], now[0])
    assert len(ids) == started
    if mode == "latest":
        assert ids == [tick_id("s", T0 + 1500)]
    assert tick_runs(world) == sorted(ids)
    assert schedule_pass(world, ["nightly"], now[0]) == []  # handled: never again
    now[0] = T0 + 6 * 300 + 1
    assert schedule_pass(world, ["nightly"], now[0]) == [tick_id("s", T0 + 1800)]  # on time: every mode


def test_a_tick_is_started_once_even_when_two_passes_race(worlds: Worlds) -> None:
    """Two workers that both compute a tick submit one run: the id is stored once."""
    world, now = clocked(worlds, T0 + 1)
    other = worlds.open(clock=lambda: now[0])
    world.schedules.create(Schedule("s", nightly, every=60, input="x", catch_up="all"))
    schedule_pass(world, ["nightly"], now[0])
    now[0] = T0 + 121
    rec = world.schedules.store.get("s")
    assert rec is not None
    from durable.runtime._schedules import start_tick

    a = [start_tick(world, rec, t) for t in (T0 + 60, T0 + 120)]
    b = schedule_pass(other, ["nightly"], now[0])  # it did not see the first one advance
    assert a == b
    assert tick_runs(world) == sorted(a)


def test_world_schedules_pause_resume_delete_and_list_with_the_next_tick(worlds: Worlds) -> None:
    """A paused schedule starts nothing and shows no next tick; resuming applies catch_up."""
    world, now = clocked(worlds, T0 + 1)
    info = world.schedules.create(Schedule("s", nightly, cron="0 3 * * *", input="x"))
    assert info.next_tick == "2026-12-02T03:00:00Z"
    assert [s.name for s in world.schedules.list()] == ["s"]
    schedule_pass(world, ["nightly"], now[0])
    paused = world.schedules.pause("s")
    assert paused.paused and paused.next_tick is None
    now[0] = T0 + 3 * 86400
    assert schedule_pass(world, ["nightly"], now[0]) == []
    world.schedules.resume("s")
    assert schedule_pass(world, ["nightly"], now[0]) == [tick_id("s", T0 + 3 * 86400)]  # latest
    world.schedules.delete("s")
    assert world.schedules.list() == []
    with pytest.raises(ConfigurationError, match="no schedule"):
        world.schedules.pause("s")


def test_backfill_starts_every_tick_of_the_range_once(worlds: Worlds) -> None:
    """Backfill ignores catch_up and never starts a tick whose run exists."""
    world, now = clocked(worlds, T0 + 1)
    world.schedules.create(Schedule("s", nightly, cron="0 3 * * *", input="x", catch_up="none"))
    start = datetime(2026, 11, 28, 3, tzinfo=UTC)
    handles = world.schedules.backfill("s", start, start + timedelta(days=2))
    assert [h.run_id for h in handles] == [
        "schedule:s:2026-11-28T03:00:00Z",
        "schedule:s:2026-11-29T03:00:00Z",
        "schedule:s:2026-11-30T03:00:00Z",
    ]
    again = world.schedules.backfill("s", start, start + timedelta(days=2))
    assert [h.run_id for h in again] == [h.run_id for h in handles]
    assert len(tick_runs(world)) == 3


async def test_a_worker_starts_and_drives_the_ticks_of_its_schedules(worlds: Worlds) -> None:
    """Worker(schedules=) stores the schedule, starts each due tick and drives its run to the end."""
    world, now = clocked(worlds, T0 + 1)
    async with durable.Worker(
        world, workflows=[], schedules=[Schedule("beat", nightly, every=60, input="b")]
    ):
        # A first pass at T0 + 1 starts the schedule's ticks from then; then time passes T0 + 60.
        await until(lambda: world.schedules.list()[0].handled_until is not None, what="the first pass")
        now[0] = T0 + 61
        rid = tick_id("beat", T0 + 60)
        await until(
            lambda: getattr(world.log.info(rid), "status", None) == "completed", what="the tick's run"
        )
    assert await durable.handle(rid, world=world).result() == "ran b"
    assert [s.name for s in world.schedules.list()] == ["beat"]


def test_little_schedules_shows_each_schedule_with_its_next_tick(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI lists schedules, their workflow and next tick."""
    world = durable.local_world(tmp_path / "data")
    world.schedules.create(Schedule("nightly", nightly, cron="0 3 * * *", input="x"))
    world.close()
    assert main(["schedules", "--data-dir", str(tmp_path / "data")]) == 0
    out = capsys.readouterr().out
    assert "nightly" in out and "0 3 * * *" in out and "T03:00:00Z" in out


@pytest.mark.parametrize("mode", ["latest", "all", "none"])
def test_ticks_late_by_at_most_missed_after_start_whatever_catch_up(worlds: Worlds, mode: str) -> None:
    """A pass 8 s late on a 1 s schedule starts all eight ticks: none is missed yet."""
    world, now = clocked(worlds, T0)
    world.schedules.create(Schedule("s", nightly, every=1, input="x", catch_up=mode))
    assert schedule_pass(world, ["nightly"], now[0]) == []
    now[0] = T0 + 8
    ids = schedule_pass(world, ["nightly"], now[0])
    assert ids == [tick_id("s", T0 + k) for k in range(1, 9)]
    assert tick_runs(world) == sorted(ids)


@pytest.mark.parametrize(
    ("mode", "first"), [("latest", []), ("all", [10, 20, 30]), ("none", [])], ids=["latest", "all", "none"]
)
def test_only_ticks_more_than_missed_after_late_follow_catch_up(
    worlds: Worlds, mode: str, first: list[int]
) -> None:
    """100 s without a pass, ticks every 10 s: 40..100 start (<= 60 s late); older ones follow catch_up."""
    world, now = clocked(worlds, T0)
    world.schedules.create(Schedule("s", nightly, every=10, input="x", catch_up=mode))
    schedule_pass(world, ["nightly"], now[0])
    now[0] = T0 + 100
    ids = schedule_pass(world, ["nightly"], now[0])
    assert ids == [tick_id("s", T0 + k) for k in [*first, 40, 50, 60, 70, 80, 90, 100]]
    assert schedule_pass(world, ["nightly"], now[0]) == []


def test_latest_starts_the_newest_missed_tick_when_no_later_one_is_due(worlds: Worlds) -> None:
    """Ticks every 100 s, 150 s without a pass: both are missed and latest starts the newer only."""
    world, now = clocked(worlds, T0)
    world.schedules.create(Schedule("s", nightly, every=100, input="x"))
    schedule_pass(world, ["nightly"], now[0])
    now[0] = T0 + 270
    assert schedule_pass(world, ["nightly"], now[0]) == [tick_id("s", T0 + 200)]


async def test_a_worker_restarted_within_missed_after_starts_every_tick_it_was_down_for(
    worlds: Worlds,
) -> None:
    """Stop a worker, let 8 s of 1 s ticks pass on the clock, start another: every tick runs once."""
    world, now = clocked(worlds, T0)
    beat = Schedule("beat", nightly, every=1, input="b")  # catch_up="latest", the default
    async with durable.Worker(world, workflows=[], schedules=[beat]):
        for _ in range(10_000):
            if (rec := world.schedules.store.get("beat")) is not None and rec.last_tick is not None:
                break
            await asyncio.sleep(0.005)
    now[0] = T0 + 8
    wanted = [tick_id("beat", T0 + k) for k in range(1, 9)]
    async with durable.Worker(world, workflows=[], schedules=[beat]):
        for _ in range(20_000):
            infos = [world.log.info(rid) for rid in wanted]
            if all(i is not None and i.status == "completed" for i in infos):
                break
            await asyncio.sleep(0.005)
    assert [await durable.handle(rid, world=world).result() for rid in wanted] == ["ran b"] * 8
    assert tick_runs(world) == []  # every tick's run finished; no other tick started
