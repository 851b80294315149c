"""Decision loops: a step revisited in one scope, each visit its own durable unit."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import durable
from durable import MaxVisitsExceededError, NondeterminismError
from tests.conftest import Worlds, step_starts
from tests.helpers.crash import SimulatedCrash


def drive(wf: Any, inp: Any = None, **kwargs: Any) -> Any:
    """Run ``run_workflow`` to its end on a fresh event loop."""
    return asyncio.run(durable.run_workflow(wf, inp, **kwargs))


def _step_paths(world: durable.World, run_id: str, type_: str) -> list[str]:
    return [e.path for e in world.events(run_id) if e.type == type_]  # type: ignore[union-attr]


def make_loop(
    runs: Counter[str],
    verdicts: dict[int, str],
    *,
    crash_at: set[int] | None = None,
    max_visits: int = 4,
) -> durable.DurableFunction:
    """A draft/critique loop whose critic answers from ``verdicts`` (visit -> verdict)."""
    crash_at = crash_at if crash_at is not None else set()

    @durable.step(max_visits=max_visits)
    async def revise(draft: str) -> str:
        visit = draft.count("+")
        runs[f"revise:{visit}"] += 1
        if visit in crash_at:
            crash_at.discard(visit)
            raise SimulatedCrash
        return draft + "+"

    @durable.step(max_visits=max_visits)
    async def critique(draft: str) -> str:
        visit = draft.count("+") - 1
        runs[f"critique:{visit}"] += 1
        return verdicts.get(visit, "revise")

    @durable.workflow
    async def loop(draft: str) -> str:
        while True:
            draft = await revise(draft)
            if await critique(draft) == "accept":
                return draft

    return loop  # type: ignore[no-any-return]


def test_each_visit_gets_its_own_visit_path(world: durable.World) -> None:
    """A step with max_visits > 1 commits each entry under the path suffix .visit[k], k from 0."""
    loop = make_loop(Counter(), {2: "accept"})
    assert drive(loop, "d", world=world, run_id="r") == "d+++"
    assert _step_paths(world, "r", "step.completed") == [
        "revise.visit[0]",
        "critique.visit[0]",
        "revise.visit[1]",
        "critique.visit[1]",
        "revise.visit[2]",
        "critique.visit[2]",
    ]


def test_visit_paths_are_counted_per_branch_scope(world: durable.World) -> None:
    """Visits are counted per scope, so each branch of a fan-out numbers its own visits from 0."""

    @durable.step(max_visits=3)
    async def bump(x: int) -> int:
        return x + 1

    async def twice(x: int) -> int:
        return await bump(await bump(x))

    @durable.workflow
    async def fan(xs: list[int]) -> list[int]:
        return await durable.parallel("items", xs, twice, key=str)

    assert drive(fan, [1, 5], world=world, run_id="r") == [3, 7]
    assert sorted(_step_paths(world, "r", "step.completed")) == [
        "items[1].bump.visit[0]",
        "items[1].bump.visit[1]",
        "items[5].bump.visit[0]",
        "items[5].bump.visit[1]",
    ]


def test_committed_visits_replay_without_running(worlds: Worlds) -> None:
    """A resume of a finished loop returns every visit's recorded output and runs no step."""
    runs: Counter[str] = Counter()
    loop = make_loop(runs, {1: "accept"})
    first = drive(loop, "d", world=worlds.open(), run_id="r")
    before = dict(runs)
    again = drive(loop, "d", world=worlds.open(), run_id="r")
    assert (first, again, dict(runs)) == ("d++", "d++", before)


def test_failed_later_visit_leaves_earlier_visits_committed(worlds: Worlds) -> None:
    """A visit that fails for good does not touch the visits committed before it; a retry runs only it."""
    runs: Counter[str] = Counter()
    failures = {1}

    @durable.step(max_visits=3)
    async def revise(draft: str) -> str:
        visit = draft.count("+")
        runs[f"revise:{visit}"] += 1
        if visit in failures:
            failures.discard(visit)
            raise ValueError("the writer gave up")
        return draft + "+"

    @durable.workflow
    async def loop(draft: str) -> str:
        for _ in range(3):
            draft = await revise(draft)
        return draft

    with pytest.raises(ValueError, match="the writer gave up"):
        drive(loop, "d", world=worlds.open(), run_id="r")
    world = worlds.open()
    out = drive(loop, "d", world=world, run_id="r", retry_failed=True)
    assert out == "d+++"
    assert runs == Counter({"revise:0": 1, "revise:1": 2, "revise:2": 1})
    assert _step_paths(world, "r", "step.completed") == [
        "revise.visit[0]",
        "revise.visit[1]",
        "revise.visit[2]",
    ]


def test_crash_during_visit_k_reruns_visit_k_and_replays_the_ones_below(worlds: Worlds) -> None:
    """A crash inside visit 2 resumes visit 2 from its start while visits 0 and 1 replay."""
    runs: Counter[str] = Counter()
    loop = make_loop(runs, {3: "accept"}, crash_at={2})
    with pytest.raises(SimulatedCrash):
        drive(loop, "d", world=worlds.open(), run_id="r")
    world = worlds.open()
    assert drive(loop, "d", world=world, run_id="r") == "d++++"
    assert runs == Counter(
        {
            "revise:0": 1,
            "critique:0": 1,
            "revise:1": 1,
            "critique:1": 1,
            "revise:2": 2,
            "critique:2": 1,
            "revise:3": 1,
            "critique:3": 1,
        }
    )
    attempts = [(e.path, e.attempt) for e in step_starts(world, "r") if e.path == "revise.visit[2]"]
    # started twice; a crash is not a failed attempt, so both starts carry attempt 1
    assert attempts == [("revise.visit[2]", 1), ("revise.visit[2]", 1)]


def test_decision_routing_replays_from_the_committed_output(worlds: Worlds) -> None:
    """After a crash the loop follows the verdicts the critic committed, not what it would say now."""
    runs: Counter[str] = Counter()
    verdicts = {0: "revise", 1: "revise", 3: "accept"}
    loop = make_loop(runs, verdicts, crash_at={2})
    with pytest.raises(SimulatedCrash):
        drive(loop, "d", world=worlds.open(), run_id="r")
    verdicts.update({0: "accept", 1: "accept"})  # the critic has changed its mind since
    world = worlds.open()
    assert drive(loop, "d", world=world, run_id="r") == "d++++"
    assert (runs["critique:0"], runs["critique:1"]) == (1, 1)
    recorded = [
        e.output  # type: ignore[union-attr]
        for e in world.events("r")
        if e.type == "step.completed" and e.path.startswith("critique")  # type: ignore[union-attr]
    ]
    assert recorded == ["revise", "revise", "revise", "accept"]


def test_changed_input_of_a_committed_visit_is_nondeterminism(worlds: Worlds) -> None:
    """A committed visit is immutable: resuming code that gives it another input fails closed."""
    suffix = ["+"]

    @durable.step(max_visits=2)
    async def revise(draft: str) -> str:
        return draft + "+"

    @durable.step
    async def stop() -> None:
        raise SimulatedCrash

    @durable.workflow
    async def loop(draft: str) -> str:
        draft = await revise(draft + suffix[0])
        await stop()
        return draft

    with pytest.raises(SimulatedCrash):
        drive(loop, "d", world=worlds.open(), run_id="r")
    suffix[0] = "-"
    with pytest.raises(NondeterminismError, match=r"revise\.visit\[0\]"):
        drive(loop, "d", world=worlds.open(), run_id="r")


def test_exceeding_max_visits_names_the_step_the_path_and_the_limit(world: durable.World) -> None:
    """The entry after max_visits raises MaxVisitsExceededError carrying step, path and limit."""
    loop = make_loop(Counter(), {}, max_visits=2)
    with pytest.raises(MaxVisitsExceededError) as info:
        drive(loop, "d", world=world, run_id="r")
    err = info.value
    assert (err.step, err.path, err.limit, err.run_id) == ("revise", "revise.visit[2]", 2, "r")
    assert "'revise'" in str(err)
    assert "revise.visit[2]" in str(err)
    assert "max_visits=2" in str(err)


def test_second_entry_of_a_single_visit_step_raises_without_suffix(world: durable.World) -> None:
    """A default step entered twice in one scope raises MaxVisitsExceededError with the plain path."""

    @durable.step
    async def once(x: int) -> int:
        return x

    @durable.workflow
    async def wf() -> int:
        return await once(1) + await once(2)

    with pytest.raises(MaxVisitsExceededError) as info:
        drive(wf, None, world=world, run_id="r")
    assert (info.value.step, info.value.path, info.value.limit) == ("once", "once", 1)
    assert "durable.branch" in str(info.value)


def test_max_visits_is_counted_again_on_resume(worlds: Worlds) -> None:
    """Visit counts are rebuilt from the log on resume, so the cap holds across a crash."""
    runs: Counter[str] = Counter()
    loop = make_loop(runs, {}, crash_at={1}, max_visits=2)
    with pytest.raises(SimulatedCrash):
        drive(loop, "d", world=worlds.open(), run_id="r")
    with pytest.raises(MaxVisitsExceededError, match=r"revise\.visit\[2\]"):
        drive(loop, "d", world=worlds.open(), run_id="r")
    assert (runs["revise:0"], runs["revise:1"]) == (1, 2)
