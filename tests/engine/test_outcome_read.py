"""An ended run's outcome is read from its last row where the log can give it, as from its whole log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable.engine import outcome_of, recover_log
from tests.conftest import Worlds


@durable.step
async def double(x: int) -> int:
    return x * 2


@durable.workflow
async def completes(x: int) -> int:
    return await double(x)


@durable.workflow
async def fails(x: int) -> int:
    await double(x)
    raise ValueError("no")


@durable.workflow
async def asks(x: int) -> int:
    await double(x)
    return int(durable.interrupt("how many?"))


@pytest.mark.parametrize(
    ("wf", "raised", "kind"),
    [
        (completes, None, "run.completed"),
        (fails, ValueError, "run.failed"),
        (asks, durable.RunInterrupted, "run.interrupted"),
    ],
)
def test_the_outcome_of_an_ended_run_is_what_its_whole_log_says(
    worlds: Worlds, wf: Any, raised: type[BaseException] | None, kind: str
) -> None:
    """Completed, failed and waiting runs: the last row's outcome equals the index's terminal."""
    world = worlds.open()
    if raised is None:
        asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r"))
    else:
        with pytest.raises(raised):
            asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r"))
    got = outcome_of(world.log, "r")
    assert got is not None
    assert got[0] == kind
    assert got == recover_log(world.log, "r").terminal


def test_a_run_without_an_outcome_reads_none(worlds: Worlds) -> None:
    """An unknown run and a run whose last row is no outcome: ``None``, as the index says."""
    from durable.testing import SimulatedCrash, crashing_world

    world = worlds.open()
    assert outcome_of(world.log, "nobody") is None
    dying = crashing_world(world, crash_before=lambda type_, data: type_ == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(completes, 3, world=dying, run_id="r"))
    assert [e.type for e in world.events("r")][-1] == "step.completed"
    assert outcome_of(world.log, "r") is None
    assert recover_log(world.log, "r").terminal is None


def test_a_handle_returns_the_output_from_the_last_row(worlds: Worlds) -> None:
    """``result()`` of a finished run: the output rebuilt from its outcome row."""
    world = worlds.open()

    async def main() -> Any:
        h = durable.start_workflow(completes, 21, world=world, run_id="r")
        return await h.result(timeout=30)

    assert asyncio.run(main()) == 42
