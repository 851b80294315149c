"""Type-checker expectations for outer loops (checked by mypy in CI, not run)."""

from __future__ import annotations

from typing import assert_type

import durable


@durable.workflow
async def grow(text: str) -> str:
    return text + "!"


def sync_supervise(cycle: durable.Cycle) -> durable.Done[str] | durable.Continue[str]:
    if cycle.is_last:
        return durable.Done(str(cycle.output))
    return durable.Continue(str(cycle.output), summary=f"cycle {cycle.number}")


async def async_supervise(cycle: durable.Cycle) -> durable.Done[str] | durable.Continue[str]:
    return durable.Done(str(cycle.output))


async def check(world: durable.World) -> None:
    assert_type(durable.Done("x").final_output, str)
    assert_type(durable.Continue(3).next_input, int)
    for supervise in (sync_supervise, async_supervise):
        result = await durable.run_outer_loop(
            grow, "hi", supervise=supervise, max_cycles=3, outer_loop_id="ol", world=world
        )
        assert_type(result, durable.OuterLoopResult)
        assert_type(result.cycles, tuple[durable.CycleRecord, ...])
