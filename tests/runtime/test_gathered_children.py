"""Child runs gathered without branch keys: the parent blocks, and a cancel of it cancels them too."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import durable
from tests.conftest import Worlds
from tests.helpers.waiting import until

RUNNING: dict[str, asyncio.Event] = {}
family = durable.Queue("family")


@durable.step
async def began(x: str) -> str:
    RUNNING.setdefault(x, asyncio.Event()).set()
    return x


@durable.workflow
async def gathered_child(x: str) -> str:
    await began(x)
    await durable.sleep(0.5)
    return x


@durable.workflow
async def gathering_parent(n: int) -> list[str]:
    first = asyncio.ensure_future(gathered_child("a"))
    await RUNNING.setdefault("a", asyncio.Event()).wait()  # then the second call meets it in one scope
    return list(await asyncio.gather(first, gathered_child("b")))


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RUNNING.clear()


def _children(world: durable.World, parent: str) -> list[str]:
    return [r.run_id for r in world.log.runs() if r.parent_run_id == parent]


async def test_cancelling_a_parent_that_gathered_children_without_keys_cancels_them(
    worlds: Worlds, caplog: pytest.LogCaptureFixture
) -> None:
    """The running child ends cancelled with its parent's reason, and nothing is logged as unhandled."""
    world = worlds.open()
    unhandled: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
    caplog.set_level(logging.ERROR)
    async with durable.Worker(world, workflows=[gathering_parent, gathered_child], queues=[family]):
        parent = durable.start_workflow(gathering_parent, 1, world=world, queue=family, run_id="parent")
        await until(lambda: durable.runtime.run_status(world, "parent").status == "blocked", 30, "the block")
        assert durable.runtime.run_status(world, "parent").reason == "nondeterminism"
        await parent.cancel()
        children = _children(world, "parent")
        assert children  # the first child run had started
        for child in children:  # a child that outlived its parent's drive would now complete
            await until(
                lambda c=child: durable.runtime.run_status(world, c).status not in ("running", "enqueued"),
                30,
                f"child {child} to end",
            )
    assert (await parent.status_detail()).status == "cancelled"
    for child in children:
        st = durable.runtime.run_status(world, child)
        assert (st.status, st.reason) == ("cancelled", "requested"), child
    assert unhandled == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
