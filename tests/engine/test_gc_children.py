"""gc keeps every finished run that an unfinished run depends on (its child runs, at any depth)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import durable
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on

CHARGES: Counter[str] = Counter()


@durable.tool
async def charge(order: str) -> str:
    """A plain tool: neither idempotent nor reconcilable, so it must never run twice."""
    CHARGES[order] += 1
    return f"charged {order}"


@durable.workflow
async def payment(order: str) -> str:
    return await charge(order)


@durable.workflow
async def shop(order: str) -> str:
    receipt = await payment(order)  # a child run: '<run id>:<effect key>'
    return receipt.upper()


@durable.tool(idempotent=True)
async def start_payment(order: str) -> str:
    return await payment(order)  # a child run inside a tool: '<run id>:<tool key>/payment:<hash>'


@durable.workflow
async def orchestrator(order: str) -> str:
    return (await start_payment(order)).upper()


@durable.workflow
async def outer(order: str) -> str:
    return await orchestrator(order)  # a grandchild run below a finished child


@pytest.mark.parametrize(
    ("wf", "receipt_of"),
    [(shop, "workflow:payment"), (orchestrator, "tool:start_payment"), (outer, "workflow:orchestrator")],
    ids=["child", "child-of-a-tool", "grandchild"],
)
def test_gc_keeps_the_finished_child_of_a_killed_parent(worlds: Worlds, wf: object, receipt_of: str) -> None:
    """Parent killed after its child completed; gc; resume: the child's plain tool ran once."""
    CHARGES.clear()
    world = worlds.crashing(on("effect.receipt", receipt_of))  # dies before the parent records the result
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, "o1", world=world, run_id="p"))  # type: ignore[call-overload]
    assert CHARGES == {"o1": 1}
    world = worlds.open()
    statuses = {i.run_id: i.status for i in world.runs()}
    assert statuses["p"] == "running"
    finished = sorted(r for r, s in statuses.items() if s == "completed")
    assert finished and all(r.startswith("p:") for r in finished)

    assert durable.gc(world=world, older_than=0, dry_run=True) == []
    assert durable.gc(world=world, older_than=0) == []
    assert sorted(i.run_id for i in world.runs()) == sorted(statuses)

    out = asyncio.run(durable.run_workflow(wf, "o1", world=worlds.open(), run_id="p"))  # type: ignore[call-overload]
    assert out == "CHARGED O1"
    assert CHARGES == {"o1": 1}
    # Once the parent has finished, nothing depends on the children any more.
    assert sorted(durable.gc(world=worlds.open(), older_than=0)) == sorted([*statuses])


def test_gc_still_deletes_finished_runs_nothing_depends_on(worlds: Worlds) -> None:
    """A finished parent and its finished children go; an unrelated running run stays."""
    CHARGES.clear()
    world = worlds.open()
    asyncio.run(durable.run_workflow(shop, "o2", world=world, run_id="done"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                shop, "o3", world=worlds.crashing(on("effect.intent", "tool:charge")), run_id="stuck"
            )
        )
    deleted = durable.gc(world=worlds.open(), older_than=0)
    assert sorted(deleted) == ["done", "done:workflow:payment#0"]
    assert {i.run_id for i in worlds.open().runs()} == {"stuck", "stuck:workflow:payment#0"}
