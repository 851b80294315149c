"""A durable call made and never awaited fails the run with ConfigurationError naming it and its line."""

from __future__ import annotations

import asyncio
import inspect

import pytest

import durable
from durable import ConfigurationError
from tests.conftest import Worlds

CALLS: list[str] = []


@durable.tool
async def charge(order: str) -> str:
    CALLS.append(f"charge:{order}")
    return f"charged {order}"


@durable.step
async def review(order: str) -> str:
    CALLS.append(f"review:{order}")
    return f"reviewed {order}"


@durable.step
def tally(order: str) -> str:
    CALLS.append(f"tally:{order}")
    return f"tallied {order}"


@durable.workflow
async def pay(order: str) -> str:
    return await charge(order)


FORGOT_LINE: dict[str, int] = {}


@durable.workflow
async def forgets_a_tool(order: str) -> str:
    FORGOT_LINE["tool"] = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    charge(order)  # type: ignore[unused-coroutine]  # the forgotten await
    return "done"


@durable.step
async def forgets_inside_a_step(order: str) -> str:
    FORGOT_LINE["step"] = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    charge(order)  # type: ignore[unused-coroutine]
    return "reviewed"


@durable.workflow
async def step_forgets(order: str) -> str:
    return await forgets_inside_a_step(order)


@durable.workflow
async def forgets_a_child(order: str) -> str:
    FORGOT_LINE["child"] = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    pay(order)  # type: ignore[unused-coroutine]
    return await review(order)


@durable.workflow
async def schedules_everything(order: str) -> list[str]:
    first = charge(order + "-a")  # made now, awaited later: fine
    await asyncio.sleep(0)
    out = [await first]
    out.append(await asyncio.create_task(review(order)))
    async with durable.branch("x"):
        out.extend(await asyncio.gather(charge(order + "-b")))
    out += await durable.parallel("p", ["c", "d"], charge, key=str)
    out.append(tally(order))  # a sync step stays sync: its value, at once
    return out


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()


def test_a_forgotten_await_on_a_tool_fails_the_run_naming_the_call_file_and_line(worlds: Worlds) -> None:
    """The error names the tool and this file's line; the tool never ran, nothing of it was recorded."""
    world = worlds.open()
    with pytest.raises(ConfigurationError) as err:
        asyncio.run(durable.run_workflow(forgets_a_tool, "o1", world=world, run_id="f1"))
    text = str(err.value)
    assert f"tool 'charge' was called at {__file__}:{FORGOT_LINE['tool']} but never awaited" in text
    assert "Put `await` before the call" in text
    assert err.value.run_id == "f1"
    assert CALLS == []
    assert [e.type for e in world.events("f1")] == ["run.started", "run.failed"]  # no intent, no receipt


def test_a_forgotten_await_inside_a_step_fails_before_the_step_commits(worlds: Worlds) -> None:
    """A step body that returns with an un-awaited tool call fails the run; the step is not committed."""
    world = worlds.open()
    with pytest.raises(ConfigurationError, match="tool 'charge' was called at") as err:
        asyncio.run(durable.run_workflow(step_forgets, "o2", world=world, run_id="f2"))
    assert f"{__file__}:{FORGOT_LINE['step']}" in str(err.value)
    assert "step 'forgets_inside_a_step' returned without it" in str(err.value)
    assert err.value.path == "forgets_inside_a_step"
    assert CALLS == []
    assert [e.type for e in world.events("f2")] == ["run.started", "step.started", "run.failed"]


def test_a_forgotten_child_workflow_is_named_too(worlds: Worlds) -> None:
    """An un-awaited child workflow is reported; the awaited step after it ran, the child did not start."""
    world = worlds.open()
    with pytest.raises(ConfigurationError) as err:
        asyncio.run(durable.run_workflow(forgets_a_child, "o3", world=world, run_id="f3"))
    assert f"workflow 'pay' was called at {__file__}:{FORGOT_LINE['child']}" in str(err.value)
    assert CALLS == ["review:o3"]
    assert [r.run_id for r in world.runs()] == ["f3"]  # no child run was created


def test_calls_awaited_later_gathered_tasked_or_parallel_are_not_forgotten(worlds: Worlds) -> None:
    """Coroutines awaited later or given to create_task, gather or parallel are not forgotten."""
    world = worlds.open()
    out = asyncio.run(durable.run_workflow(schedules_everything, "o", world=world, run_id="ok"))
    assert out == [
        "charged o-a",
        "reviewed o",
        "charged o-b",
        "charged c",
        "charged d",
        "tallied o",
    ]
    assert (
        asyncio.run(durable.run_workflow(schedules_everything, "o", world=worlds.open(), run_id="ok")) == out
    )
    assert CALLS.count("charge:o-a") == 1  # the replay ran nothing again
