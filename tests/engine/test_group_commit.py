"""Group commit: the commits of runs driven at once share transactions, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

import durable
from durable import FencedError, LogUnavailableError
from durable.store import Append, append_one_by_one
from tests.conftest import Worlds


def grouping(world: durable.World) -> bool:
    """Whether the world's log commits several runs together (``append_each``)."""
    return getattr(world.log, "append_each", None) is not None


class Gate:
    """Holds every run before its second step's body, until ``open``; ``held`` says when all three wait."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.waiting = 0
        self.held = asyncio.Event()
        self.opened = asyncio.Event()

    async def at_second_step(self) -> None:
        self.waiting += 1
        if self.waiting == self.runs:
            self.held.set()
        await self.opened.wait()


def make(ran: list[str], gate: Gate | None = None) -> Any:
    @durable.step(max_visits=3)
    async def work(run: str, i: int) -> int:
        await asyncio.sleep(0)  # the other runs go on meanwhile
        if gate is not None and i == 1:
            await gate.at_second_step()
        ran.append(f"{run}:{i}")
        return i * 10

    @durable.workflow
    async def wf(run: str) -> int:
        total = 0
        for i in range(3):
            total += await work(run, i)
        return total

    return wf


def test_runs_driven_together_commit_together_and_read_as_if_alone(worlds: Worlds) -> None:
    """Five runs at once: the same events as one run alone, in fewer transactions than appends."""
    world = worlds.open()
    ran: list[str] = []
    wf = make(ran)

    async def main() -> list[int]:
        alone = await durable.run_workflow(wf, "solo", world=world, run_id="solo")
        assert alone == 30
        return await asyncio.gather(
            *(durable.run_workflow(wf, f"g{k}", world=world, run_id=f"g{k}") for k in range(5))
        )

    assert asyncio.run(main()) == [30] * 5
    solo = [e.type for e in world.events("solo")]
    for k in range(5):
        assert [e.type for e in world.events(f"g{k}")] == solo
        info = world.log.info(f"g{k}")
        assert info is not None
        assert info.status == "completed"
    if grouping(world):
        assert 0 < world.commits.transactions < 5 * len(solo) // 2
    else:
        assert world.commits.transactions == 0
    assert world.commits.drives == 0
    assert sorted(ran).count("g0:1") == 1


def test_a_run_fenced_while_its_commit_is_grouped_fails_alone(worlds: Worlds) -> None:
    """Another driver takes one run over mid-step: it fails with FencedError, the others complete."""
    world = worlds.open()
    ran: list[str] = []
    wf = make(ran, gate := Gate(3))

    async def main() -> list[Any]:
        tasks = [
            asyncio.ensure_future(durable.run_workflow(wf, f"g{k}", world=world, run_id=f"g{k}"))
            for k in range(3)
        ]
        await gate.held.wait()  # every run is in its second step, its first committed
        world.log.fence("g1")  # a newer driver of g1
        gate.opened.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    a, b, c = asyncio.run(main())
    assert (a, c) == (30, 30)
    assert isinstance(b, FencedError)
    assert b.run_id == "g1"
    assert [e.type for e in world.events("g1")][-1] == "step.completed"  # the first step only
    assert len([e for e in world.events("g1") if e.type == "step.completed"]) == 1
    again = asyncio.run(durable.run_workflow(wf, "g1", world=world, run_id="g1"))
    assert again == 30


class FailingOnce:
    """A log whose next ``append_each`` (or ``append``) fails as an unavailable disk would."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _trip(self) -> None:
        if self.armed:
            self.armed = False
            raise LogUnavailableError("the disk is full (simulated)")

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        self._trip()
        self.inner.append(batch, sync=sync)

    def append_each(self, batch: Sequence[Append]) -> list[BaseException | None]:
        self._trip()
        each = getattr(self.inner, "append_each", None)
        if each is None:
            return append_one_by_one(self.inner, batch)
        return list(each(batch))


def test_a_failed_group_transaction_reaches_every_run_in_it_and_loses_nothing(worlds: Worlds) -> None:
    """The group's transaction fails: each of its runs raises the error; a resume completes them."""
    inner = worlds.open()
    log = FailingOnce(inner.log)
    world = durable.World(
        log, inner.locks, data_dir=inner.data_dir, artifacts=inner.artifacts, codec=inner.codec
    )  # type: ignore[arg-type]
    ran: list[str] = []
    wf = make(ran, gate := Gate(3))

    async def main() -> list[Any]:
        tasks = [
            asyncio.ensure_future(durable.run_workflow(wf, f"g{k}", world=world, run_id=f"g{k}"))
            for k in range(3)
        ]
        await gate.held.wait()
        log.armed = True  # the next transaction, which the three second steps share
        gate.opened.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outs = asyncio.run(main())
    assert all(isinstance(o, LogUnavailableError) for o in outs), outs
    for k in range(3):
        assert len([e for e in world.events(f"g{k}") if e.type == "step.completed"]) == 1

    async def resume() -> list[int]:
        return await asyncio.gather(
            *(durable.run_workflow(wf, f"g{k}", world=world, run_id=f"g{k}") for k in range(3))
        )

    again = asyncio.run(resume())
    assert again == [30, 30, 30]
    assert sorted(r for r in ran if r.endswith(":0")) == ["g0:0", "g1:0", "g2:0"]  # committed: not run again


def test_a_run_cancelled_while_its_commit_waits_keeps_its_log_in_order(worlds: Worlds) -> None:
    """Cancelled while its step's commit waits for the group: the commit is decided first."""
    world = worlds.open()
    ran: list[str] = []

    @durable.step
    async def first(run: str) -> str:
        await asyncio.sleep(0)
        ran.append(run)
        if run == "g0":  # cancel this run's task just as its commit starts to wait
            asyncio.get_running_loop().call_soon(tasks[0].cancel)
        return run

    @durable.workflow
    async def wf(run: str) -> str:
        return await first(run)

    tasks: list[asyncio.Future[Any]] = []

    async def main() -> list[Any]:
        tasks.extend(
            asyncio.ensure_future(durable.run_workflow(wf, f"g{k}", world=world, run_id=f"g{k}"))
            for k in range(3)
        )
        return await asyncio.gather(*tasks, return_exceptions=True)

    outs = asyncio.run(main())
    assert outs[1:] == ["g1", "g2"]
    kinds = [e.type for e in world.events("g0")]
    seqs = [e.seq for e in world.events("g0")]
    assert seqs == list(range(1, len(seqs) + 1))
    if grouping(world):  # the cancellation met the wait: the step's commit was made first
        assert isinstance(outs[0], asyncio.CancelledError)
        assert kinds == ["run.started", "step.completed"]
    else:  # committed at once: the run had ended before the cancellation came
        assert outs[0] == "g0"
    assert asyncio.run(durable.run_workflow(wf, "g0", world=world, run_id="g0")) == "g0"
    assert ran.count("g0") == 1  # the committed step is not run again


@pytest.mark.parametrize("runs", [1, 2])
def test_a_run_driven_alone_commits_at_once(world: durable.World, runs: int) -> None:
    """With no other run beside it a run never waits for the group; with one it may."""
    ran: list[str] = []
    wf = make(ran)

    async def main() -> list[int]:
        return await asyncio.gather(
            *(durable.run_workflow(wf, f"g{k}", world=world, run_id=f"g{k}") for k in range(runs))
        )

    assert asyncio.run(main()) == [30] * runs
    if runs == 1 or not grouping(world):
        assert world.commits.transactions == 0
    else:
        assert world.commits.transactions > 0


def test_a_commit_that_fails_after_its_call_returned_is_raised_by_the_run_not_the_event_loop(
    worlds: Worlds,
) -> None:
    """A failed commit of a value recorded at the next turn is raised by the run, not by a loop callback.

    No caller waits on that commit, so the run's next durable call raises its error.
    """
    from durable.testing import SimulatedCrash

    @durable.step
    async def after(x: int) -> int:
        return x

    @durable.workflow
    async def stamped(x: int) -> int:
        durable.now()  # its event commits at the next turn, with no caller waiting on that commit
        await asyncio.sleep(0.01)  # durable: ignore[clock]  (a turn, or a few, without a durable call)
        return await after(x)

    unhandled: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
        world = worlds.crashing(lambda t, d: t == "value.recorded")
        with pytest.raises(SimulatedCrash):
            await durable.run_workflow(stamped, 1, world=world, run_id="r")

    asyncio.run(main())
    assert unhandled == []
