"""durable.patched(): new executions take the new side, resumes of older logs the old one (every backend)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import durable
from durable import ConfigurationError, RunInterrupted


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def markers(world: durable.World, run_id: str) -> list[str]:
    return [e.key for e in world.events(run_id) if e.type == "patch.marked"]  # type: ignore[union-attr]


def steps(calls: Counter[str]) -> tuple[Any, Any, Any]:
    """The steps of every version: ``a``, the old ``b`` and the new ``c``."""

    @durable.step
    async def a(x: int) -> int:
        calls["a"] += 1
        return x + 1

    @durable.step
    async def b(x: int) -> int:
        calls["b"] += 1
        return x * 10

    @durable.step
    async def c(x: int) -> int:
        calls["c"] += 1
        return x * 100

    return a, b, c


def interrupted(world: durable.World, wf: Any, run_id: str) -> None:
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, 1, world=world, run_id=run_id))


def test_a_resume_of_a_run_past_the_point_takes_the_old_side(world: durable.World) -> None:
    """Old code recorded b before the change point: new code's patched() is False and b replays."""
    calls: Counter[str] = Counter()
    a, b, c = steps(calls)

    @durable.workflow(name="deploy")
    async def old(x: int) -> int:
        y = await b(await a(x))
        return y + int(durable.interrupt("go?"))

    @durable.workflow(name="deploy")
    async def new(x: int) -> int:
        z = await a(x)
        y = await (c(z) if durable.patched("use-c") else b(z))
        return y + int(durable.interrupt("go?"))

    interrupted(world, old, "r1")
    assert run(durable.run_workflow(new, 1, world=world, run_id="r1", resume="5")) == 25
    assert (calls["b"], calls["c"]) == (1, 0)
    assert markers(world, "r1") == []


def test_a_new_run_takes_the_new_side_and_keeps_it_on_resume(world: durable.World) -> None:
    """A run under new code records the marker, runs c, and replays c on resume."""
    calls: Counter[str] = Counter()
    a, b, c = steps(calls)

    @durable.workflow(name="deploy")
    async def new(x: int) -> int:
        z = await a(x)
        y = await (c(z) if durable.patched("use-c") else b(z))
        return y + int(durable.interrupt("go?"))

    interrupted(world, new, "r2")
    assert run(durable.run_workflow(new, 1, world=world, run_id="r2", resume="5")) == 205
    assert (calls["b"], calls["c"]) == (0, 1)
    assert markers(world, "r2") == ["patched[use-c]#0"]


def test_an_old_run_stopped_before_the_point_takes_the_new_side(world: durable.World) -> None:
    """Old code stopped before the change: the resume under new code is a new execution there."""
    calls: Counter[str] = Counter()
    a, b, c = steps(calls)

    @durable.workflow(name="deploy")
    async def old(x: int) -> int:
        z = await a(x)
        n = int(durable.interrupt("go?"))
        return await b(z) + n

    @durable.workflow(name="deploy")
    async def new(x: int) -> int:
        z = await a(x)
        n = int(durable.interrupt("go?"))
        return await (c(z) if durable.patched("use-c") else b(z)) + n

    interrupted(world, old, "r3")
    assert run(durable.run_workflow(new, 1, world=world, run_id="r3", resume="5")) == 205
    assert (calls["b"], calls["c"]) == (0, 1)


def test_deleting_the_if_later_shifts_nothing(world: durable.World) -> None:
    """A run with the marker replays under code without the patched() call: c replays, nothing drifts."""
    calls: Counter[str] = Counter()
    a, b, c = steps(calls)

    @durable.workflow(name="deploy")
    async def patched_code(x: int) -> int:
        z = await a(x)
        y = await (c(z) if durable.patched("use-c") else b(z))
        return y + int(durable.interrupt("go?"))

    @durable.workflow(name="deploy")
    async def cleaned_up(x: int) -> int:
        y = await c(await a(x))
        return y + int(durable.interrupt("go?"))

    interrupted(world, patched_code, "r4")
    assert run(durable.run_workflow(cleaned_up, 1, world=world, run_id="r4", resume="5")) == 205
    assert (calls["a"], calls["c"]) == (1, 1)


def test_in_a_loop_each_visit_decides_on_its_own(world: durable.World) -> None:
    """Visits the old code recorded take the old side; later visits of the same loop take the new one."""
    calls: Counter[str] = Counter()

    @durable.step(max_visits=5)
    async def old_step(i: int) -> str:
        calls["old"] += 1
        return f"old{i}"

    @durable.step(max_visits=5)
    async def new_step(i: int) -> str:
        calls["new"] += 1
        return f"new{i}"

    @durable.workflow(name="looping")
    async def old(x: int) -> list[str]:
        out = []
        for i in range(3):
            out.append(await old_step(i))
            if i == 1:
                durable.interrupt("half way")
        return out

    @durable.workflow(name="looping")
    async def new(x: int) -> list[str]:
        out = []
        for i in range(3):
            out.append(await (new_step(i) if durable.patched("new-step") else old_step(i)))
            if i == 1:
                durable.interrupt("half way")
        return out

    interrupted(world, old, "r5")
    assert run(durable.run_workflow(new, 1, world=world, run_id="r5", resume="ok")) == [
        "old0",
        "old1",
        "new2",
    ]
    assert markers(world, "r5") == ["patched[new-step]#2"]
    assert run(durable.run_workflow(new, 1, world=world, run_id="r5")) == ["old0", "old1", "new2"]
    assert (calls["old"], calls["new"]) == (2, 1)


def test_in_parallel_branches_each_branch_decides_on_its_own(world: durable.World) -> None:
    """A branch the old code recorded keeps the old side; a branch it had not reached takes the new one."""
    calls: Counter[str] = Counter()
    a, b, c = steps(calls)

    async def old_part(key: str, x: int) -> int:
        async with durable.branch(key):
            return await b(x)

    async def new_part(key: str, x: int) -> int:
        async with durable.branch(key):
            return await (c(x) if durable.patched("use-c") else b(x))

    @durable.workflow(name="branches")
    async def old(x: int) -> int:
        first = await old_part("p", x)
        durable.interrupt("go?")
        return first + await old_part("q", x)

    @durable.workflow(name="branches")
    async def new(x: int) -> int:
        first = await new_part("p", x)
        durable.interrupt("go?")
        return first + await new_part("q", x)

    interrupted(world, old, "r6")
    assert run(durable.run_workflow(new, 1, world=world, run_id="r6", resume="ok")) == 110
    assert markers(world, "r6") == ["[q].patched[use-c]#0"]
    assert (calls["b"], calls["c"]) == (1, 1)


def test_inside_a_step_body_the_step_scope_decides(world: durable.World) -> None:
    """patched() in a step body takes the new side on a new execution, and its marker is under the step."""
    calls: Counter[str] = Counter()
    a, b, c = steps(calls)

    @durable.step
    async def outer(x: int) -> int:
        return await (c(x) if durable.patched("use-c") else b(x))

    @durable.workflow(name="in-step")
    async def wf(x: int) -> int:
        return await outer(x)

    assert run(durable.run_workflow(wf, 1, world=world, run_id="r7")) == 100
    assert markers(world, "r7") == ["outer.patched[use-c]#0"]


def test_outside_a_run_patched_is_the_new_code() -> None:
    """Called outside any run, patched() answers True and records nothing."""
    assert durable.patched("anything") is True


@pytest.mark.parametrize("bad", ["", "a[1]", "x#2", 3, None])
def test_a_bad_change_id_is_refused_with_advice(bad: Any) -> None:
    """A change id that is not a plain non-empty string raises ConfigurationError with an example."""
    with pytest.raises(ConfigurationError, match="change id"):
        durable.patched(bad)
