"""Debounce: a burst of starts with one key is one run, with the last input, on every backend."""

from __future__ import annotations

import asyncio

import pytest

import durable
from durable.runtime._driver import control_of
from tests.conftest import Worlds

INPUTS: list[str] = []
inbox = durable.Queue("inbox")


@durable.workflow
async def summarize(batch: str) -> str:
    INPUTS.append(batch)
    return batch


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def _fresh() -> None:
    INPUTS.clear()


def test_a_burst_of_starts_with_one_key_returns_one_handle_and_keeps_the_last_input(worlds: Worlds) -> None:
    """Three starts within the window: one run, the same handle each time, the third input."""
    clock = Clock()
    world = worlds.open(clock=clock)
    handles = []
    for batch in ("a", "b", "c"):
        handles.append(
            durable.start_workflow(summarize, batch, world=world, queue=inbox, debounce_key="k", debounce=10)
        )
        clock.t += 4
    assert len({h.run_id for h in handles}) == 1
    rec = control_of(world).get(handles[0].run_id)
    assert rec is not None
    assert rec.start_at == 1_008.0 + 10  # moved to 10 s after the last start

    async def go() -> str:
        clock.t = 1_018.5
        async with durable.Worker(world, workflows=[summarize], queues=[inbox]):
            return str(await handles[0].result(timeout=30))

    assert asyncio.run(go()) == "c"
    assert INPUTS == ["c"]


def test_debounce_max_bounds_how_far_a_burst_moves_the_start(worlds: Worlds) -> None:
    """With debounce_max=12 the start never moves past 12 s after the first start."""
    clock = Clock()
    world = worlds.open(clock=clock)
    for _ in range(5):
        h = durable.start_workflow(
            summarize, "x", world=world, queue=inbox, debounce_key="k", debounce=5, debounce_max=12
        )
        clock.t += 4
    rec = control_of(world).get(h.run_id)
    assert rec is not None
    assert rec.start_at == 1_012.0


def test_a_worker_does_not_start_a_debounced_run_before_its_time(worlds: Worlds) -> None:
    """The run waits on its queue until its start; a new key's start makes a run of its own."""
    clock = Clock()
    world = worlds.open(clock=clock)
    first = durable.start_workflow(summarize, "a", world=world, queue=inbox, debounce_key="k", debounce=60)
    other = durable.start_workflow(summarize, "z", world=world, queue=inbox, debounce_key="other", debounce=1)
    assert other.run_id != first.run_id

    async def go() -> None:
        clock.t += 2
        async with durable.Worker(world, workflows=[summarize], queues=[inbox]):
            assert await other.result(timeout=30) == "z"
            assert await first.status() == "enqueued"

    asyncio.run(go())
    assert INPUTS == ["z"]


def test_a_start_after_the_run_began_makes_a_new_run(worlds: Worlds) -> None:
    """Once the debounced run was claimed, the same key starts another run."""
    clock = Clock()
    world = worlds.open(clock=clock)
    first = durable.start_workflow(summarize, "a", world=world, queue=inbox, debounce_key="k", debounce=1)

    async def go() -> None:
        clock.t += 2
        async with durable.Worker(world, workflows=[summarize], queues=[inbox]):
            assert await first.result(timeout=30) == "a"
        second = durable.start_workflow(
            summarize, "b", world=world, queue=inbox, debounce_key="k", debounce=1
        )
        assert second.run_id != first.run_id

    asyncio.run(go())


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"debounce_key": "k", "debounce": 1}, "pass queue="),
        ({"queue": inbox, "debounce_key": "k"}, "needs debounce="),
        ({"queue": inbox, "debounce": 1}, "need debounce_key="),
        ({"queue": inbox, "debounce_key": "k", "debounce": 0}, "seconds > 0"),
        ({"queue": inbox, "debounce_key": "k", "debounce": 5, "debounce_max": 2}, "shorter than"),
    ],
)
def test_a_debounce_that_cannot_work_is_refused_and_writes_nothing(
    world: durable.World, options: dict[str, object], says: str
) -> None:
    """A debounce without a queue, a key or a positive window raises ConfigurationError at once."""
    with pytest.raises(durable.ConfigurationError, match=says):
        durable.start_workflow(summarize, "a", world=world, run_id="d", **options)  # type: ignore[arg-type]
    assert control_of(world).get("d") is None
