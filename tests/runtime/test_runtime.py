"""The runtime in one process, on both backends: handles, queues, limits, cancellation, time limits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

import durable
from durable import ConfigurationError, Queue, RunCancelledError, RunNotFoundError, StepTimeoutError, Worker
from durable.runtime import STATUSES
from durable.runtime._driver import control_of
from tests.conftest import Worlds
from tests.helpers.waiting import until

CALLS: list[str] = []


@durable.step
async def inc(x: int) -> int:
    CALLS.append(f"inc:{x}")
    return x + 1


@durable.workflow
async def plus_one(x: int) -> int:
    return await inc(x)


@durable.workflow
async def sleeper(n: int) -> int:
    for _ in range(n):
        await durable.sleep(0.01)
    return n


@durable.workflow
async def parent_of_sleeper(n: int) -> int:
    return await sleeper(n)


GATE: dict[str, asyncio.Event] = {}


@durable.step
async def gated(key: str) -> str:
    CALLS.append(f"gated:{key}")
    await GATE.setdefault(key, asyncio.Event()).wait()
    return key


@durable.workflow
async def wait_gate(key: str) -> str:
    return await gated(key)


async def wait_events(world: durable.World, run_id: str, n: int) -> None:
    """Wait until the run's log holds at least ``n`` events."""
    await until(lambda: len(world.log.read(run_id)) >= n)


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    GATE.clear()


async def test_start_without_queue_runs_in_the_background(worlds: Worlds) -> None:
    """The handle comes back before the run finishes; result() rebuilds the output."""
    world = worlds.open()
    h = durable.start_workflow(plus_one, 4, world=world)
    assert await h.status() in ("running", "completed")
    assert await h.result() == 5
    assert await h.status() == "completed"
    assert await durable.handle(h.run_id, world=world).result() == 5
    assert await (await durable.start_workflow(plus_one, 4, world=world, run_id=h.run_id)).result() == 5
    assert CALLS == ["inc:4"]


def _count_reads(world: durable.World, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the status and outcome reads made through ``world`` from now on, in order."""
    reads: list[str] = []
    ctl = control_of(world)
    for store, name in ((ctl, "get"), (ctl, "read_with_info"), (world.log, "info"), (world.log, "last_row")):
        real = getattr(store, name, None)
        if real is not None:

            def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
                reads.append(_name)
                return _real(*a, **k)

            monkeypatch.setattr(store, name, counted)
    return reads


async def test_the_result_of_a_run_driven_here_is_read_from_its_last_row_alone(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the run this process drives has ended, result() reads the log's last row and no status."""
    world = worlds.open()
    h = durable.start_workflow(wait_gate, "here", world=world)
    await until(lambda: "gated:here" in CALLS)
    reads = _count_reads(world, monkeypatch)
    GATE["here"].set()
    assert await h.result() == "here"
    assert reads == ["last_row"]


async def test_a_run_whose_end_was_announced_is_read_from_its_last_row_alone(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another world that heard the run's end (Postgres announces it) reads its last row alone."""
    if worlds.kind != "postgres":
        pytest.skip("only the Postgres world hears other processes' announcements")
    other = worlds.open()  # as another process would
    ctl = control_of(other)
    ctl.version()  # its listener is on
    h = durable.start_workflow(plus_one, 4, world=worlds.open())
    assert await h.result() == 5
    await until(lambda: ctl.heard_lately(f"run:{h.run_id}"))  # type: ignore[attr-defined]
    handle = durable.handle(h.run_id, world=other)
    reads = _count_reads(other, monkeypatch)
    assert await handle.result() == 5
    assert reads == ["last_row"]


async def test_many_results_awaited_at_once_each_get_their_own_run(worlds: Worlds) -> None:
    """Sixty handles of runs driven elsewhere, awaited together, each get their run's output.

    On Postgres each wait subscribes to its own run's announcements; every
    subscription ends with its wait, so none is left in the listener.
    """
    driving, waiting = worlds.open(), worlds.open()  # the waiting world drives nothing
    ctl = control_of(waiting)
    ctl.version()  # its listener, if it has one, is on before the waits subscribe
    notifier = getattr(ctl, "notifier", None)
    before = None if notifier is None else len(notifier._everyone)
    keys = [f"many{i}" for i in range(60)]
    started = [durable.start_workflow(wait_gate, k, world=driving) for k in keys]
    handles = [durable.handle(h.run_id, world=waiting) for h in started]
    waits = asyncio.gather(*(h.result(timeout=60) for h in handles))
    await until(lambda: all(f"gated:{k}" in CALLS for k in keys))
    if notifier is not None:
        await until(lambda: len(notifier._everyone) == before + len(keys))  # one per wait
    for k in reversed(keys):
        GATE[k].set()
    assert await waits == keys
    if notifier is not None:
        assert len(notifier._everyone) == before
        assert not any(f"{kind}:{h.run_id}" in notifier._exact for h in started for kind in ("run", "cancel"))


async def test_a_run_neither_driven_here_nor_announced_is_read_from_its_status(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing that says the run ended, result() reads its status first, then its outcome."""
    h = durable.start_workflow(plus_one, 4, world=worlds.open())
    assert await h.result() == 5
    other = worlds.open()
    handle = durable.handle(h.run_id, world=other)
    reads = _count_reads(other, monkeypatch)
    assert await handle.result() == 5
    assert reads[0] in ("get", "read_with_info", "info") and reads[-1] == "last_row"


async def test_the_result_of_a_failed_run_reads_its_status_and_raises_its_error(worlds: Worlds) -> None:
    """A run whose last row is not its completion: the status read decides, the error is rebuilt."""
    h = durable.start_workflow(breaks_after_a_step, 1, world=worlds.open())
    with pytest.raises(ValueError, match="no good"):
        await h.result()
    with pytest.raises(ValueError, match="no good"):
        await durable.handle(h.run_id, world=worlds.open()).result()


@durable.workflow
async def breaks_after_a_step(x: int) -> int:
    await inc(x)
    raise ValueError("no good")


class Pair(BaseModel):
    a: int
    b: int


@durable.workflow
async def pair(x: int) -> Pair:
    return Pair(a=x, b=await inc(x))


async def test_handle_rebuilds_the_annotated_type_where_the_workflow_is_known(worlds: Worlds) -> None:
    """handle() finds the workflow the world object started or serves; elsewhere it gives JSON."""
    world = worlds.open()
    q = Queue("typed")
    h = durable.start_workflow(pair, 2, world=world, queue=q)
    async with Worker(world, workflows=[pair], queues=[q]):
        assert await durable.handle(h.run_id, world=world).result() == Pair(a=2, b=3)
    if worlds.kind == "sqlite":  # a world object that never saw the workflow: the log's JSON
        assert await durable.handle(h.run_id, world=worlds.open()).result() == {"a": 2, "b": 3}


async def test_handle_of_an_unknown_run_raises(worlds: Worlds) -> None:
    with pytest.raises(RunNotFoundError):
        durable.handle("nope", world=worlds.open())


@pytest.mark.parametrize(
    "kwargs", [{"priority": 1}, {"partition_key": "a"}, {"dedup_id": "d"}, {"priority": -1, "queue": "q"}]
)
async def test_queue_options_without_a_queue_write_nothing(worlds: Worlds, kwargs: dict[str, Any]) -> None:
    world = worlds.open()
    with pytest.raises(ConfigurationError):
        durable.start_workflow(plus_one, 1, world=world, run_id="r", **kwargs)
    with pytest.raises(RunNotFoundError):
        durable.handle("r", world=world)


async def test_queued_runs_wait_for_a_worker_in_priority_then_fifo_order(worlds: Worlds) -> None:
    world = worlds.open()
    q = Queue("q", concurrency=1)
    hs = [
        durable.start_workflow(plus_one, i, world=world, queue=q, priority=p)
        for i, p in [(1, 5), (2, 0), (3, 5)]
    ]
    assert [await h.status() for h in hs] == ["enqueued"] * 3
    async with Worker(world, workflows=[plus_one], queues=[q]):
        assert [await h.result() for h in hs] == [2, 3, 4]
    assert CALLS == ["inc:2", "inc:1", "inc:3"]


async def test_dedup_id_returns_the_unfinished_run_and_is_free_after(worlds: Worlds) -> None:
    world = worlds.open()
    q = Queue("q")
    a = durable.start_workflow(plus_one, 1, world=world, queue=q, dedup_id="order-1")
    b = durable.start_workflow(plus_one, 2, world=world, queue=q, dedup_id="order-1")
    assert a.run_id == b.run_id
    async with Worker(world, workflows=[plus_one], queues=[q]):
        assert await b.result() == 2
        # The result is readable once the log commits it; the id is freed when the driver
        # records the run's end in the control store, a moment later.
        started: list[durable.RunHandle] = []

        def a_new_run() -> bool:
            started.append(durable.start_workflow(plus_one, 3, world=world, queue=q, dedup_id="order-1"))
            return started[-1].run_id != a.run_id

        await until(a_new_run, 30, "the dedup id to be free")
        c = started[-1]
        assert await c.result() == 4


async def test_cancelling_an_enqueued_run_is_immediate_and_the_rest_proceed(worlds: Worlds) -> None:
    world = worlds.open()
    q = Queue("q")
    a = durable.start_workflow(plus_one, 1, world=world, queue=q)
    b = durable.start_workflow(plus_one, 2, world=world, queue=q)
    await a.cancel()
    assert await a.status() == "cancelled"
    async with Worker(world, workflows=[plus_one], queues=[q]):
        assert await b.result() == 3
        with pytest.raises(RunCancelledError):
            await a.result()
    assert CALLS == ["inc:2"]


async def test_cancel_stops_a_running_run_at_its_next_durable_wait_and_resume_continues(
    worlds: Worlds,
) -> None:
    world = worlds.open()
    h = durable.start_workflow(sleeper, 10_000, world=world)
    await wait_events(world, h.run_id, 2)
    await h.cancel()
    with pytest.raises(RunCancelledError) as err:
        await h.result()
    assert err.value.reason == "requested"
    assert (await h.status_detail()).reason == "requested"
    assert world.events(h.run_id)[-1].type == "run.cancelled"
    again = await durable.resume_run(h.run_id, world=world, workflows=[sleeper])
    assert await again.status() == "running"
    await again.cancel()
    with pytest.raises(RunCancelledError):
        await again.result()
    assert [e.type for e in world.events(h.run_id)].count("run.resumed") == 1


async def test_resume_run_leaves_a_completed_run_alone(worlds: Worlds) -> None:
    world = worlds.open()
    h = durable.start_workflow(plus_one, 1, world=world)
    await h.result()
    n = len(world.events(h.run_id))
    assert await (await durable.resume_run(h.run_id, world=world)).status() == "completed"
    assert len(world.events(h.run_id)) == n


async def test_child_runs_are_cancelled_with_their_parent(worlds: Worlds) -> None:
    world = worlds.open()
    h = durable.start_workflow(parent_of_sleeper, 10_000, world=world)
    await until(lambda: [r for r in world.runs() if r.parent_run_id == h.run_id])
    await h.cancel()
    with pytest.raises(RunCancelledError):
        await h.result()
    (child,) = [r for r in world.runs() if r.parent_run_id == h.run_id]
    assert child.status == "cancelled"


async def test_deadline_cancels_the_run_with_reason_deadline(worlds: Worlds) -> None:
    world = worlds.open()
    h = durable.start_workflow(sleeper, 10_000, world=world, deadline=0.05)
    with pytest.raises(RunCancelledError) as err:
        await h.result()
    assert err.value.reason == "deadline"
    started = world.events(h.run_id)[0]
    assert started.type == "run.started" and started.deadline_at is not None  # type: ignore[union-attr]


async def test_deadline_counts_from_the_start_not_from_the_queue(worlds: Worlds) -> None:
    """A queued run's deadline is written when a worker starts it, not when it was enqueued."""
    clock = [1000.0]
    world = worlds.open(clock=lambda: clock[0])
    q = Queue("q")
    h = durable.start_workflow(plus_one, 1, world=world, queue=q, deadline=10)
    clock[0] += 50  # longer than the deadline, spent waiting in the queue
    async with Worker(world, workflows=[plus_one], queues=[q]):
        assert await h.result() == 2
    assert world.events(h.run_id)[0].deadline_at == 1060.0  # type: ignore[union-attr]


TRIES: list[int] = []


@durable.step(timeout=0.05, retry=durable.RetryPolicy(max_attempts=3, backoff=0.0))
async def slow_then_fast(x: int) -> int:
    TRIES.append(x)
    if len(TRIES) < 2:
        await asyncio.sleep(10)
    return x


@durable.step(timeout=0.02)
async def always_slow(x: int) -> int:
    TRIES.append(x)
    await asyncio.sleep(10)
    return x


@durable.workflow
async def timed(x: int) -> int:
    return await slow_then_fast(x)


@durable.workflow
async def timed_out(x: int) -> int:
    return await always_slow(x)


async def test_step_timeout_is_retried_by_the_steps_policy(worlds: Worlds) -> None:
    TRIES.clear()
    world = worlds.open()
    assert await durable.run_workflow(timed, 7, world=world) == 7
    assert TRIES == [7, 7]


async def test_final_step_timeout_is_recorded_and_replayed_without_running(worlds: Worlds) -> None:
    TRIES.clear()
    world = worlds.open()
    with pytest.raises(StepTimeoutError):
        await durable.run_workflow(timed_out, 1, world=world, run_id="t")
    with pytest.raises(StepTimeoutError):
        await durable.run_workflow(timed_out, 1, world=worlds.open(), run_id="t")
    assert TRIES == [1]
    assert any(e.type == "step.failed" for e in world.events("t"))


def test_a_sync_step_with_timeout_is_refused_at_decoration() -> None:
    with pytest.raises(ConfigurationError, match="not an async def"):

        @durable.step(timeout=1)
        def sync_step(x: int) -> int:
            return x


def test_two_workflows_with_one_name_are_refused(worlds: Worlds) -> None:
    @durable.workflow(name="plus_one")
    async def other(x: int) -> int:
        return x

    with pytest.raises(ConfigurationError, match="two workflows"):
        Worker(worlds.open(), workflows=[plus_one, other])


async def test_worker_concurrency_and_partitions_bound_runs_in_flight(worlds: Worlds) -> None:
    world = worlds.open()
    q = Queue("q", worker_concurrency=2, partition_concurrency=1)
    hs = [
        durable.start_workflow(wait_gate, k, world=world, queue=q, partition_key=k[0])
        for k in ["a1", "a2", "b1", "c1"]
    ]
    async with Worker(world, workflows=[wait_gate], queues=[q]) as w:
        await until(lambda: len(CALLS) >= 2)
        assert w.in_flight == 2
        assert sorted(CALLS) == ["gated:a1", "gated:b1"]  # a2 waits for a1's partition, c1 for room
        for k in ["a1", "a2", "b1", "c1"]:
            GATE.setdefault(k, asyncio.Event()).set()
        assert [await h.result() for h in hs] == ["a1", "a2", "b1", "c1"]


async def test_queue_concurrency_counts_every_worker(worlds: Worlds) -> None:
    world = worlds.open()
    q = Queue("q", concurrency=1)
    hs = [durable.start_workflow(wait_gate, k, world=world, queue=q) for k in ["x", "y"]]
    async with (
        Worker(world, workflows=[wait_gate], queues=[q]),
        Worker(world, workflows=[wait_gate], queues=[q]),
    ):
        await until(lambda: CALLS)
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert CALLS == ["gated:x"]
        GATE.setdefault("x", asyncio.Event()).set()
        GATE.setdefault("y", asyncio.Event()).set()
        assert [await h.result() for h in hs] == ["x", "y"]


async def test_recover_runs_drives_a_run_whose_driver_is_gone(worlds: Worlds) -> None:
    """A run left 'running' (its driver stopped at a durable point) is found and finished."""
    world = worlds.open()
    h = durable.start_workflow(sleeper, 30, world=world)
    await wait_events(world, h.run_id, 3)
    from durable.runtime._driver import default_driver

    await default_driver(world).stop()  # like a graceful stop: the run stays resumable
    assert await h.status() == "running"
    handles = await durable.recover_runs(world, workflows=[sleeper])
    assert [x.run_id for x in handles] == [h.run_id]
    assert await h.result() == 30


def test_status_values_are_the_contract() -> None:
    assert STATUSES == ("enqueued", "running", "interrupted", "blocked", "completed", "failed", "cancelled")


@durable.workflow
async def asks(x: int) -> int:
    answer = durable.interrupt({"question": x})
    return await inc(int(answer))


async def test_cancelling_an_interrupted_run_closes_it_and_resume_run_continues(worlds: Worlds) -> None:
    """Nobody drives a run that waits for an answer: the cancel call records run.cancelled itself."""
    world = worlds.open()
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(asks, 1, world=world, run_id="asks")
    assert await durable.handle("asks", world=world).status() == "interrupted"
    await durable.handle("asks", world=world).cancel()
    assert await durable.handle("asks", world=world).status() == "cancelled"
    assert [e.type for e in world.events("asks")][-1] == "run.cancelled"
    with pytest.raises(RunCancelledError, match="resume_run"):
        await durable.run_workflow(asks, 1, world=world, run_id="asks", resume=5)
    h = await durable.resume_run("asks", world=world, workflows=[asks])
    with pytest.raises(durable.RunInterrupted):
        await h.result()
    assert await durable.run_workflow(asks, 1, world=world, run_id="asks", resume=5) == 6


async def test_cancelling_a_run_whose_driver_died_closes_it(worlds: Worlds) -> None:
    """A run left running by a crash has no driver to see the request: the cancel call closes it."""
    from durable.testing import SimulatedCrash

    crashing = worlds.crashing(lambda t, _d: t == "step.completed")
    with pytest.raises(SimulatedCrash):
        await durable.run_workflow(plus_one, 1, world=crashing, run_id="dead")
    world = worlds.open()
    assert await durable.handle("dead", world=world).status() == "running"
    await durable.handle("dead", world=world).cancel()
    assert await durable.handle("dead", world=world).status() == "cancelled"
    with pytest.raises(RunCancelledError):
        await durable.handle("dead", world=world).result()


async def test_a_worker_leaves_a_run_it_does_not_know_alone_and_says_so_once(
    worlds: Worlds, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery skips a run of an unknown workflow, logs it once, and a worker that knows it takes it."""
    from durable.runtime import _worker

    passes: list[int] = []
    real_pass = _worker.recovery_pass

    def counted(*args: Any) -> Any:
        passes.append(1)
        return real_pass(*args)

    monkeypatch.setattr(_worker, "recovery_pass", counted)
    world = worlds.open()
    h = durable.start_workflow(sleeper, 30, world=world)
    await wait_events(world, h.run_id, 3)
    from durable.runtime._driver import default_driver

    await default_driver(world).stop()
    with caplog.at_level("WARNING", logger="durable.runtime"):
        async with Worker(world, workflows=[plus_one]):
            # A recovery pass found the run and said so; three more passes leave it alone.
            await until(lambda: any(h.run_id in r.getMessage() for r in caplog.records), what="the warning")
            seen = len(passes)
            await until(lambda: len(passes) >= seen + 3, what="three more recovery passes")
            assert await h.status() == "running"
    said = [r.getMessage() for r in caplog.records if h.run_id in r.getMessage()]
    assert len(said) == 1
    assert "does not know" in said[0]
    async with Worker(world, workflows=[sleeper]):
        assert await h.result() == 30


@durable.tool(outbox=True)
async def notify_someone(text: str) -> str:
    return text


async def test_a_world_without_an_outbox_still_serves_its_queues(worlds: Worlds) -> None:
    """Outbox tools are known to every worker; dispatching them never keeps a worker from claiming runs."""
    world = worlds.open()
    q = Queue("served")
    h = durable.start_workflow(plus_one, 1, world=world, queue=q)
    async with Worker(world, workflows=[plus_one], queues=[q]):
        assert await h.result() == 2
