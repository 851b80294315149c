"""The engine: identity, replay, resume, parallel scopes and child runs, on both backends."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from pydantic import BaseModel

import durable
from durable import (
    ConfigurationError,
    MaxVisitsExceededError,
    NondeterminismError,
    RunFailedError,
    SerializationError,
    StepFailedError,
)
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


class Item(BaseModel):
    id: str
    n: int


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def types(world: durable.World, run_id: str) -> list[str]:
    return [e.type for e in world.events(run_id)]


def test_completed_steps_are_not_run_again_on_resume(worlds: Worlds) -> None:
    """A resume after a crash replays committed steps and runs only the unfinished one."""
    calls: Counter[str] = Counter()

    @durable.step
    async def first(x: int) -> int:
        calls["first"] += 1
        return x + 1

    @durable.step
    async def second(x: int) -> int:
        calls["second"] += 1
        return x * 10

    @durable.workflow
    async def wf(x: int) -> int:
        return await second(await first(x))

    crashing = worlds.crashing(on("step.completed", '"path":"second"'))
    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, 1, world=crashing, run_id="r"))
    assert calls == {"first": 1, "second": 1}
    out = run(durable.run_workflow(wf, 1, world=worlds.open(), run_id="r"))
    assert out == 20
    assert calls == {"first": 1, "second": 2}


def test_finished_run_returns_recorded_output_without_running(world: durable.World) -> None:
    """Calling a finished run again returns its output rebuilt as the annotated type."""
    calls = Counter[str]()

    @durable.step
    async def make(i: Item) -> Item:
        calls["make"] += 1
        return Item(id=i.id, n=i.n + 1)

    @durable.workflow
    async def wf(i: Item) -> Item:
        return await make(i)

    first = run(durable.run_workflow(wf, {"id": "a", "n": 1}, world=world, run_id="r"))
    again = run(durable.run_workflow(wf, {"id": "a", "n": 1}, world=world, run_id="r"))
    assert again == first == Item(id="a", n=2)
    assert isinstance(again, Item)
    assert calls["make"] == 1


def test_events_have_gap_free_seqs_and_expected_types(world: durable.World) -> None:
    """A simple run writes run.started, one step.completed and run.completed with seqs 1..n.

    The step's start is folded into its completion (nothing was written
    between the two), so there is no separate step.started.
    """

    @durable.step
    async def s(x: int) -> int:
        return x

    @durable.workflow
    async def wf(x: int) -> int:
        return await s(x)

    run(durable.run_workflow(wf, 3, world=world, run_id="r"))
    events = world.events("r")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events] == ["run.started", "step.completed", "run.completed"]
    done = events[1]
    assert (done.path, done.attempt, done.pos, done.output) == ("s", 1, 0, 3)  # type: ignore[union-attr]
    assert done.input_hash  # type: ignore[union-attr]


def test_step_paths_follow_scopes_branches_and_visits(world: durable.World) -> None:
    """Paths are built from branch scopes, step names and visit suffixes."""

    @durable.tool
    async def score(cid: str) -> int:
        return len(cid)

    @durable.step
    async def worker(cid: str) -> int:
        return await score(cid)

    @durable.step(max_visits=3)
    async def loop(i: int) -> int:
        return i

    @durable.workflow
    async def wf() -> int:
        await durable.parallel("review", ["c1", "c2"], worker, key=lambda c: c)
        for i in range(2):
            await loop(i)
        return 0

    run(durable.run_workflow(wf, world=world, run_id="r"))
    paths = {getattr(e, "path", None) or getattr(e, "key", None) for e in world.events("r")}
    assert {
        "review[c1].worker",
        "review[c2].worker",
        "review[c1].worker.tool:score#0",
        "loop.visit[0]",
        "loop.visit[1]",
    } <= paths


def test_step_entered_twice_without_max_visits_raises(world: durable.World) -> None:
    """A default step entered twice in one scope raises MaxVisitsExceededError naming it."""

    @durable.step
    async def once() -> int:
        return 1

    @durable.workflow
    async def wf() -> int:
        await once()
        return await once()

    with pytest.raises(MaxVisitsExceededError) as info:
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert info.value.step == "once"
    assert info.value.limit == 1
    assert "max_visits" in str(info.value)


def test_concurrent_calls_in_one_scope_raise_nondeterminism(world: durable.World) -> None:
    """Two durable calls in flight at once in the same scope fail at once with a hint."""

    @durable.tool
    async def slow(x: int) -> int:
        await asyncio.sleep(0)
        return x

    @durable.workflow
    async def wf() -> list[int]:
        return list(await asyncio.gather(slow(1), slow(2)))

    with pytest.raises(NondeterminismError, match="branch"):
        run(durable.run_workflow(wf, world=world, run_id="r"))


def test_changed_call_at_recorded_position_raises_nondeterminism(worlds: Worlds) -> None:
    """Resuming with code that calls another tool where the log recorded one fails closed."""

    @durable.tool(name="lookup")
    async def lookup_a(x: int) -> int:
        return x

    @durable.tool(name="fetch")
    async def fetch(x: int) -> int:
        return x

    @durable.step
    async def tail() -> int:
        return 0

    state = {"which": "a"}

    @durable.workflow(name="wf")
    async def wf() -> int:
        if state["which"] == "a":
            await lookup_a(1)
        else:
            await fetch(1)
        return await tail()

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=worlds.crashing(on("step.completed", "tail")), run_id="r"))
    state["which"] = "b"
    with pytest.raises(NondeterminismError) as info:
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert "lookup" in str(info.value)
    assert "fetch" in str(info.value)


def test_changed_step_input_on_replay_raises_nondeterminism(worlds: Worlds) -> None:
    """A committed step called again with another input on resume fails closed."""
    factor = {"v": 1}

    @durable.step
    async def s(x: int) -> int:
        return x

    @durable.step
    async def tail() -> int:
        return 0

    @durable.workflow
    async def wf() -> int:
        await s(factor["v"])
        return await tail()

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=worlds.crashing(on("step.completed", "tail")), run_id="r"))
    factor["v"] = 2
    with pytest.raises(NondeterminismError, match="recorded"):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))


def test_bad_input_fails_before_any_event(world: durable.World) -> None:
    """Input that does not fit the annotation raises and leaves no run behind."""

    @durable.workflow
    async def wf(i: Item) -> int:
        return i.n

    with pytest.raises(RunFailedError) as info:
        run(durable.run_workflow(wf, {"id": "a", "n": "not a number"}, world=world, run_id="r"))
    assert info.value.reason == "invalid_input"
    with pytest.raises(durable.RunNotFoundError):
        world.events("r")


def test_resume_with_other_input_fails_closed(world: durable.World) -> None:
    """A resume with another input raises RunFailedError(run_input_mismatch)."""

    @durable.workflow
    async def wf(x: int) -> int:
        return x

    run(durable.run_workflow(wf, 1, world=world, run_id="r"))
    with pytest.raises(RunFailedError) as info:
        run(durable.run_workflow(wf, 2, world=world, run_id="r"))
    assert info.value.cause_code == "runtime_config_error"
    assert info.value.reason == "run_input_mismatch"


def test_unserializable_output_fails_the_run_and_a_retry_after_the_fix_completes_it(
    world: durable.World,
) -> None:
    """A step output JSON cannot hold raises SerializationError naming the path and ends the run failed."""
    mode = {"bad": True}

    @durable.step
    async def s() -> object:
        return object() if mode["bad"] else "ok"

    @durable.workflow
    async def wf() -> object:
        return await s()

    with pytest.raises(SerializationError, match="'s'"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert types(world, "r")[-1] == "run.failed"
    mode["bad"] = False
    assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == "ok"


@pytest.mark.parametrize("where", ["argument", "output", "tool result"])
def test_a_lone_surrogate_raises_serialization_error_and_a_retry_after_the_fix_resumes(
    world: durable.World, where: str
) -> None:
    """A string UTF-8 cannot encode is refused where it enters the log (the run fails), not at the write."""
    bad = {"on": True}

    def text() -> str:
        return "\ud800" if bad["on"] else "fine"

    @durable.tool
    async def fetch() -> str:
        return text() if where == "tool result" else "fine"

    @durable.step
    async def s(x: str) -> str:
        return text() if where == "output" else x

    @durable.workflow
    async def wf() -> str:
        await fetch()
        return await s(text() if where == "argument" else "fine")

    with pytest.raises(SerializationError, match="lone surrogates"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert types(world, "r")[-1] == "run.failed"
    bad["on"] = False
    if where == "tool result":  # the tool ran but its result was never confirmed
        with pytest.raises(durable.UnknownCommitError):
            run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True))
    else:
        assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == "fine"


def test_failed_step_is_recorded_and_reraised_on_resume(world: durable.World) -> None:
    """A failing step records step.failed; calling the run again re-raises without running it."""
    calls = Counter[str]()

    @durable.step
    async def boom() -> int:
        calls["boom"] += 1
        raise ValueError("no good")

    @durable.workflow
    async def wf() -> int:
        return await boom()

    with pytest.raises(ValueError, match="no good"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    with pytest.raises(ValueError, match="no good"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert calls["boom"] == 1
    assert types(world, "r")[-2:] == ["step.failed", "run.failed"]


def test_unknown_exception_type_is_rebuilt_as_step_failed_error() -> None:
    """A recorded failure whose type is not importable here comes back as StepFailedError."""
    from durable.engine._failures import rebuild_error

    err = rebuild_error("nowhere.module.Oops", "bad", run_id="r", path="p")
    assert isinstance(err, StepFailedError)
    assert err.error_type == "nowhere.module.Oops"
    assert err.error_message == "bad"


def test_parallel_commits_every_branch_before_raising(worlds: Worlds) -> None:
    """A failing branch does not stop the others from committing; a resume replays them."""
    calls = Counter[str]()

    @durable.step
    async def work(x: int) -> int:
        calls[str(x)] += 1
        await asyncio.sleep(0)
        if x == 1:
            raise RuntimeError("branch 1 failed")
        return x

    @durable.workflow
    async def wf() -> list[int]:
        return await durable.parallel("fan", [0, 1, 2], work, key=str)

    world = worlds.open()
    with pytest.raises(RuntimeError, match="branch 1"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    committed = [e.path for e in world.events("r") if e.type == "step.completed"]  # type: ignore[union-attr]
    assert sorted(committed) == ["fan[0].work", "fan[2].work"]


def test_parallel_returns_results_in_item_order_with_limit(world: durable.World) -> None:
    """Results come back in item order whatever the completion order, with a concurrency limit."""

    @durable.step
    async def work(x: int) -> int:
        for _ in range(5 - x):
            await asyncio.sleep(0)
        return x * x

    @durable.workflow
    async def wf(xs: list[int]) -> list[int]:
        return await durable.parallel("sq", xs, work, key=str, limit=2)

    assert run(durable.run_workflow(wf, [1, 2, 3, 4], world=world)) == [1, 4, 9, 16]


def test_parallel_rejects_duplicate_keys(world: durable.World) -> None:
    """Two items with one key would share a path; parallel refuses them."""

    @durable.step
    async def work(x: int) -> int:
        return x

    @durable.workflow
    async def wf() -> list[int]:
        return await durable.parallel("dup", [1, 1], work, key=str)

    with pytest.raises(ConfigurationError, match="unique"):
        run(durable.run_workflow(wf, world=world))


def test_branch_keys_gathered_calls_by_key_not_completion(worlds: Worlds) -> None:
    """Tool calls gathered under branch(key) replay by key whatever order they finished in."""
    calls = Counter[str]()

    @durable.tool
    async def run_tool(call_id: str, delay: int) -> str:
        calls[call_id] += 1
        for _ in range(delay):
            await asyncio.sleep(0)
        return f"result-{call_id}"

    async def one(call_id: str, delay: int) -> str:
        async with durable.branch(call_id):
            return await run_tool(call_id, delay)

    @durable.step
    async def tail() -> int:
        return 1

    @durable.workflow
    async def wf() -> list[str]:
        out = list(await asyncio.gather(one("c1", 3), one("c2", 0)))
        await tail()
        return out

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=worlds.crashing(on("step.completed", "tail")), run_id="r"))
    out = run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert out == ["result-c1", "result-c2"]
    assert calls == {"c1": 1, "c2": 1}


def test_child_workflow_has_its_own_log_and_replays(worlds: Worlds) -> None:
    """A workflow called inside a run is a child run with a deterministic id and its own log."""
    calls = Counter[str]()

    @durable.step
    async def inner_step(x: int) -> int:
        calls["inner"] += 1
        return x + 100

    @durable.workflow
    async def child(x: int) -> int:
        return await inner_step(x)

    @durable.step
    async def tail() -> int:
        return 0

    @durable.workflow
    async def parent(x: int) -> int:
        y = await child(x)
        await tail()
        return y

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(parent, 1, world=worlds.crashing(on("step.completed", "tail")), run_id="p"))
    world = worlds.open()
    assert run(durable.run_workflow(parent, 1, world=world, run_id="p")) == 101
    assert calls["inner"] == 1
    intent = next(e for e in world.events("p") if e.type == "effect.intent")
    child_id = intent.child_run_id  # type: ignore[union-attr]
    assert child_id == "p:workflow:child#0"
    assert types(world, child_id)[0] == "run.started"
    assert world.log.info(child_id).parent_run_id == "p"  # type: ignore[union-attr]


def test_sync_step_inside_async_workflow(world: durable.World) -> None:
    """A sync step stays sync and is durable inside a run."""

    @durable.step
    def add(a: int, b: int) -> int:
        return a + b

    @durable.workflow
    async def wf() -> int:
        return add(1, 2) + add.__wrapped__(0, 0)

    assert run(durable.run_workflow(wf, world=world, run_id="r")) == 3
    assert types(world, "r").count("step.completed") == 1


def test_deterministic_values_replay(worlds: Worlds) -> None:
    """now(), uuid4() and random() return the recorded values on resume."""

    @durable.step
    async def tail() -> int:
        return 0

    @durable.workflow
    async def wf() -> list[str]:
        vals = [durable.now().isoformat(), str(durable.uuid4()), str(durable.random())]
        await tail()
        return vals

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=worlds.crashing(on("step.completed", "tail")), run_id="r"))
    world = worlds.open()
    out = run(durable.run_workflow(wf, world=world, run_id="r"))
    recorded = [e for e in world.events("r") if e.type == "value.recorded"]
    assert len(recorded) == 3
    assert out[1].replace("-", "") == recorded[1].value  # type: ignore[union-attr]


def test_methods_are_bound_and_self_is_not_part_of_identity(world: durable.World) -> None:
    """A decorated method binds self, and its identity covers only the other arguments."""

    class Agent:
        def __init__(self, name: str):
            self.name = name

        @durable.step
        async def greet(self, who: str) -> str:
            return f"{self.name} greets {who}"

    agent = Agent("ada")

    @durable.workflow
    async def wf() -> str:
        return await agent.greet("bob")

    assert run(durable.run_workflow(wf, world=world, run_id="r")) == "ada greets bob"


def test_fenced_driver_stops_and_the_new_driver_resumes(worlds: Worlds) -> None:
    """When another driver takes a newer token, the old one's next write fails and it stops."""
    world = worlds.open()
    taken = {"done": False}

    @durable.step
    async def a() -> int:
        if not taken["done"]:
            taken["done"] = True
            worlds.open().log.fence("r")  # another driver took the run over
        return 1

    @durable.step
    async def b() -> int:
        return 2

    @durable.workflow
    async def wf() -> int:
        return await a() + await b()

    with pytest.raises(durable.FencedError, match="stale"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert types(world, "r") == ["run.started"]
    assert run(durable.run_workflow(wf, world=worlds.open(), run_id="r")) == 3
