"""Sync bodies run on the run's event loop: starting another loop in one is refused with advice."""

from __future__ import annotations

import asyncio

import pytest

import durable


async def _two() -> int:
    return 2


def test_asyncio_run_in_a_sync_step_is_a_configuration_error_and_a_retry_after_the_fix_completes(
    world: durable.World,
) -> None:
    """asyncio.run in a sync step: ConfigurationError naming the step, the run failed; a retry ends it."""
    fixed = {"on": False}

    @durable.step(name="count")
    def count_sync() -> int:
        if fixed["on"]:
            return 2
        coro = _two()
        try:
            return asyncio.run(coro)
        finally:
            coro.close()  # asyncio.run refused it: never awaited

    @durable.workflow(name="wf")
    async def wf_sync() -> int:
        return count_sync()

    with pytest.raises(durable.ConfigurationError, match=r"sync step 'count'.*'async def'") as err:
        asyncio.run(durable.run_workflow(wf_sync, world=world, run_id="r"))
    assert err.value.path == "count"
    assert "retry_failed=True" in str(err.value) and "`little resume r`" in str(err.value)
    assert [e.type for e in world.events("r")][-1] == "run.failed"
    assert not any(e.type == "step.failed" for e in world.events("r"))
    fixed["on"] = True  # the advice, followed
    assert asyncio.run(durable.run_workflow(wf_sync, world=world, run_id="r", retry_failed=True)) == 2


def test_a_sync_body_s_own_runtime_error_is_left_as_it_is(world: durable.World) -> None:
    """A RuntimeError of the code's own stays the run's recorded outcome."""

    @durable.workflow
    def broken() -> int:
        raise RuntimeError("the code's own")

    with pytest.raises(RuntimeError, match="the code's own"):
        asyncio.run(durable.run_workflow(broken, world=world, run_id="r"))
    assert any(e.type == "run.failed" for e in world.events("r"))
