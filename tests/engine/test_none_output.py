"""The round-trip rule for ``None``: a return annotation that does not take ``None`` refuses it at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable import SerializationError
from tests.conftest import Worlds

FIXED: dict[str, bool] = {"score": False}


@durable.step
async def score(x: int) -> int:
    return x * 2 if FIXED["score"] else None  # type: ignore[return-value]


@durable.tool(idempotent=True)
async def lookup(x: int) -> int:
    return None  # type: ignore[return-value]


@durable.step
async def maybe(x: int) -> int | None:
    return None


@durable.workflow
async def scored(x: int) -> int:
    return await score(x)


@durable.workflow
async def looked_up(x: int) -> int:
    return await lookup(x)


@durable.workflow
async def nothing(x: int) -> str:
    return None  # type: ignore[return-value]


@durable.workflow
async def optional(x: int) -> int | None:
    return await maybe(x)


def test_none_from_a_step_annotated_int_is_refused_and_never_recorded(worlds: Worlds) -> None:
    """``-> int`` returning None fails the first run with advice; fixed, a retry of the same run completes."""
    FIXED["score"] = False
    world = worlds.open()
    with pytest.raises(SerializationError, match=r"None") as err:
        asyncio.run(durable.run_workflow(scored, 3, world=world, run_id="s"))
    assert "int | None" in str(err.value) and "Nothing of it was recorded" in str(err.value)
    assert err.value.run_id == "s" and err.value.path == "score"
    assert "step.completed" not in [e.type for e in world.events("s")]
    assert [e.type for e in world.events("s")][-1] == "run.failed"
    FIXED["score"] = True
    again = worlds.open()
    assert asyncio.run(durable.run_workflow(scored, 3, world=again, run_id="s", retry_failed=True)) == 6


@pytest.mark.parametrize("workflow", [looked_up, nothing], ids=["tool", "workflow"])
def test_none_from_a_tool_or_workflow_annotated_otherwise_is_refused(
    world: durable.World, workflow: Any
) -> None:
    """A tool's result and a workflow's output that are None against their annotation are refused too."""
    with pytest.raises(SerializationError, match=r"is None.* \| None"):
        asyncio.run(durable.run_workflow(workflow, 1, world=world, run_id="n"))
    assert not {"effect.receipt", "run.completed"} & {e.type for e in world.events("n")}


def test_none_where_the_annotation_takes_it_round_trips(worlds: Worlds) -> None:
    """``-> int | None`` returning None is stored and replays as None."""
    assert asyncio.run(durable.run_workflow(optional, 1, world=worlds.open(), run_id="o")) is None
    assert asyncio.run(durable.run_workflow(optional, 1, world=worlds.open(), run_id="o")) is None
