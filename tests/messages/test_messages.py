"""Messages to runs on both backends: send, recv, topics, timeouts, crashes around the consume."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable import ConfigurationError, NondeterminismError, RunNotFoundError
from durable.testing import SimulatedCrash
from tests.conftest import Worlds
from tests.helpers.waiting import until

HANDLED: list[Any] = []


@durable.step(max_visits=100)
async def handle_message(m: Any) -> Any:
    HANDLED.append(m)
    return m


@durable.workflow
async def inbox(n: int) -> list[Any]:
    out = []
    for _ in range(n):
        out.append(await handle_message(await durable.recv()))
    return out


@durable.workflow
async def topics() -> list[Any]:
    a = await durable.recv("a")
    default = await durable.recv()
    b = await durable.recv("b")
    return [a, default, b]


@durable.workflow
async def waits(timeout: float) -> Any:
    return await durable.recv(timeout=timeout)


@durable.workflow
async def sender(target: str) -> str:
    await durable.send(target, {"from": "sender"})
    await durable.send(target, "second", topic="t")
    return "sent"


@durable.workflow
async def idle() -> None:
    await durable.recv("never", timeout=3600)


@pytest.fixture(autouse=True)
def _reset() -> None:
    HANDLED.clear()


def received(world: durable.World, run_id: str) -> list[Any]:
    return [e.value for e in world.events(run_id) if e.type == "message.received"]


async def test_messages_sent_before_and_during_a_run_are_received_once_in_order(worlds: Worlds) -> None:
    """Messages queued before the run starts and sent while it waits come out in send order, once."""
    world = worlds.open()
    h = durable.start_workflow(inbox, 4, world=world, run_id="r", queue="q")
    await h.send("m0")
    await durable.send("r", {"n": 1}, world=world)
    async with durable.Worker(world, workflows=[inbox], queues=["q"]):
        # The run took the two queued messages and waits: the next ones are sent while it runs.
        await until(
            lambda: world.log.info("r") is not None and received(world, "r") == ["m0", {"n": 1}],
            what="the two queued messages",
        )
        await h.send("m2")
        await h.send(["m", 3])
        assert await h.result(timeout=30) == ["m0", {"n": 1}, "m2", ["m", 3]]
    assert HANDLED == ["m0", {"n": 1}, "m2", ["m", 3]]
    assert received(world, "r") == HANDLED
    assert world.open_messages().messages("r", pending=True) == []


async def test_recv_without_topic_reads_only_the_default_topic(worlds: Worlds) -> None:
    """Each topic is its own queue; recv() reads the default one only."""
    world = worlds.open()
    h = durable.start_workflow(topics, world=world)
    await h.send("B", topic="b")
    await h.send("D")
    await h.send("A", topic="a")
    assert await h.result(timeout=30) == ["A", "D", "B"]


async def test_sending_to_an_unknown_run_raises_run_not_found(worlds: Worlds) -> None:
    """A message to a run the world does not have is refused before anything is stored."""
    world = worlds.open()
    with pytest.raises(RunNotFoundError):
        await durable.send("nobody", "hi", world=world)


async def test_send_refuses_none_and_bad_topics(worlds: Worlds) -> None:
    """None is refused (recv's None means a timeout), and so is a topic that is not a name."""
    world = worlds.open()
    h = durable.start_workflow(inbox, 1, world=world, queue="q")
    with pytest.raises(ConfigurationError, match="refuses None"):
        await h.send(None)
    with pytest.raises(ConfigurationError, match="topic"):
        await h.send("x", topic="")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="world="):
        await durable.send(h.run_id, "x")


async def test_recv_outside_a_run_is_a_configuration_error() -> None:
    """recv() needs a run to record what it consumed."""
    with pytest.raises(ConfigurationError, match="inside a durable run"):
        await durable.recv()


async def test_recv_returns_none_when_its_timeout_passes(worlds: Worlds) -> None:
    """With no message, recv(timeout=) records the timeout and returns None; a replay returns None."""
    world = worlds.open()
    assert await durable.run_workflow(waits, 0.01, world=world, run_id="w") is None
    types = [e.type for e in world.events("w")]
    assert types == ["run.started", "message.waiting", "message.received", "run.completed"]
    assert world.events("w")[2].timed_out  # type: ignore[union-attr]


async def test_a_resumed_recv_waits_only_the_rest_of_its_timeout(worlds: Worlds) -> None:
    """The wait's end is recorded; after a crash the resumed recv waits only what is left of it."""
    now = [1000.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s
        await asyncio.sleep(0)

    world = worlds.open(clock=lambda: now[0], sleep=sleep)
    task = asyncio.ensure_future(durable.run_workflow(waits, 100.0, world=world, run_id="w"))
    await _until(lambda: sum(slept) >= 30)
    task.cancel()  # the driver dies in the middle of the wait
    with pytest.raises(asyncio.CancelledError):
        await task
    waited = sum(slept)
    assert [e.type for e in world.events("w")] == ["run.started", "message.waiting"]
    slept.clear()
    again = worlds.open(clock=lambda: now[0], sleep=sleep)
    assert await durable.run_workflow(waits, 100.0, world=again, run_id="w") is None
    assert sum(slept) == pytest.approx(100.0 - waited)


async def test_a_message_arriving_during_a_timed_wait_is_returned(worlds: Worlds) -> None:
    """A message sent before the timeout passes is what recv returns."""
    world = worlds.open()
    h = durable.start_workflow(waits, 3600.0, world=world)
    await _until(lambda: len(world.log.read(h.run_id)) >= 2)
    await h.send("in time")
    assert await h.result(timeout=30) == "in time"


async def test_a_resume_replays_consumed_messages_and_leaves_the_rest_waiting(worlds: Worlds) -> None:
    """A crash after a consume: the resume returns the recorded message and consumes only new ones."""
    world = worlds.crashing(lambda t, d: t == "step.completed" and d.get("output") == "b")
    store = world.open_messages()
    task = asyncio.ensure_future(durable.run_workflow(inbox, 3, world=world, run_id="r"))
    await _until(lambda: world.log.info("r") is not None)
    for m in ("a", "b", "c"):
        await durable.send("r", m, world=world)
    with pytest.raises(SimulatedCrash):
        await task
    assert received(world, "r") == ["a", "b"]  # b's step never committed
    assert [m.data for m in store.messages("r", pending=True)] == ['"c"']
    again = worlds.open()
    assert await durable.run_workflow(inbox, 3, world=again, run_id="r") == ["a", "b", "c"]
    assert received(again, "r") == ["a", "b", "c"]
    assert HANDLED == ["a", "b", "b", "c"]  # the step of b ran again; the message was consumed once


async def test_a_fenced_driver_consumes_nothing(worlds: Worlds) -> None:
    """When another driver took the run over, the consume fails and the message stays for it."""
    world = worlds.open()
    task = asyncio.ensure_future(durable.run_workflow(inbox, 1, world=world, run_id="r"))
    await _until(lambda: world.log.info("r") is not None)
    world.log.fence("r")  # a newer driver takes over
    await durable.send("r", "x", world=world)
    with pytest.raises(durable.FencedError):
        await task
    store = world.open_messages()
    assert [m.data for m in store.messages("r", pending=True)] == ['"x"']
    assert received(world, "r") == []


async def test_a_sender_that_crashed_after_sending_sends_once_on_resume(worlds: Worlds) -> None:
    """The message is stored under the call's idempotency key; the resumed send stores nothing new."""
    world = worlds.open()
    target = durable.start_workflow(inbox, 2, world=world, run_id="target", queue="q")
    crashing = worlds.crashing(lambda t, d: t == "message.sent")
    with pytest.raises(SimulatedCrash):
        await durable.run_workflow(sender, "target", world=crashing, run_id="s")
    store = world.open_messages()
    assert len(store.messages("target")) == 1  # delivered, but the send was not recorded
    assert await durable.run_workflow(sender, "target", world=worlds.open(), run_id="s") == "sent"
    msgs = store.messages("target")
    assert [(m.topic, m.data) for m in msgs] == [(None, '{"from":"sender"}'), ("t", '"second"')]
    assert [m.message_id for m in msgs] == ["s:send#0", "s:send#1"]
    assert await durable.run_workflow(sender, "target", world=worlds.open(), run_id="s") == "sent"
    assert len(store.messages("target")) == 2
    del target


async def test_a_replay_that_receives_another_topic_fails_closed(worlds: Worlds) -> None:
    """The recorded recv names its topic; code that now waits on another topic raises."""
    world = worlds.open()

    @durable.workflow(name="topic_drift")
    async def first() -> Any:
        got = await durable.recv("a", timeout=0)
        raise RuntimeError(f"crash after {got}")

    with pytest.raises(RuntimeError):
        await durable.run_workflow(first, world=world, run_id="d", retry_failed=False)

    @durable.workflow(name="topic_drift")
    async def second() -> Any:
        return await durable.recv("b", timeout=0)

    with pytest.raises(NondeterminismError):
        await durable.run_workflow(second, world=worlds.open(), run_id="d", retry_failed=True)


async def _until(cond: Any) -> None:
    for _ in range(100_000):
        if cond():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition never became true")


async def test_gc_of_a_finished_run_forgets_its_messages(worlds: Worlds) -> None:
    """Deleting a run deletes its mailbox too, consumed and waiting messages alike."""
    world = worlds.open()
    h = durable.start_workflow(inbox, 1, world=world, run_id="old")
    await h.send("a")
    await h.send("left over")
    assert await h.result(timeout=30) == ["a"]
    store = world.open_messages()
    assert len(store.messages("old")) == 2
    assert durable.gc(world=world, older_than=0) == ["old"]
    assert store.messages("old") == []


@durable.workflow
async def quick() -> str:
    return "done"


@durable.workflow
async def polite_sender(target: str) -> str:
    try:
        await durable.send(target, "late")
    except durable.RunFinishedError as exc:
        return f"refused: {exc.status}"
    return "sent"


async def test_sending_to_a_finished_run_raises_run_finished_and_stores_nothing(worlds: Worlds) -> None:
    """A message to a completed run is refused with its status and what to do; the mailbox stays empty."""
    world = worlds.open()
    assert await durable.run_workflow(quick, world=world, run_id="over") == "done"
    with pytest.raises(durable.RunFinishedError, match=r"run 'over' has finished \(completed\)") as err:
        await durable.send("over", "hi", world=world)
    assert (err.value.run_id, err.value.status) == ("over", "completed")
    assert "start a new run" in str(err.value)
    with pytest.raises(durable.RunFinishedError):
        await durable.handle("over", world=world).send("hi")
    assert world.open_messages().messages("over") == []


async def test_sending_to_a_cancelled_run_says_to_resume_it_first(worlds: Worlds) -> None:
    """A cancelled run refuses messages too, and the error names resume_run, which lets it take them again."""
    world = worlds.open()
    h = durable.start_workflow(idle, world=world, run_id="stopped")
    await _until(lambda: world.log.info("stopped") is not None)
    await h.cancel()
    with pytest.raises(durable.RunCancelledError):
        await h.result(timeout=30)
    with pytest.raises(durable.RunFinishedError, match="resume_run") as err:
        await h.send("hi")
    assert err.value.status == "cancelled"
    await durable.resume_run("stopped", world=world, workflows=[idle])
    await h.send("hi", topic="never")  # running again: accepted
    assert len(world.open_messages().messages("stopped")) == 1
    await h.cancel()


async def test_a_send_inside_a_run_to_a_finished_run_records_nothing(worlds: Worlds) -> None:
    """The sender's body gets RunFinishedError; no message.sent is recorded, and its resume decides again."""
    world = worlds.open()
    assert await durable.run_workflow(quick, world=world, run_id="over") == "done"
    assert await durable.run_workflow(polite_sender, "over", world=world, run_id="p") == "refused: completed"
    assert [e.type for e in world.events("p") if e.type == "message.sent"] == []
    assert world.open_messages().messages("over") == []


async def test_a_recorded_send_replays_after_its_target_finished(worlds: Worlds) -> None:
    """A sender that sent while its target ran replays the recorded send once the target has finished."""
    world = worlds.open()
    target = durable.start_workflow(inbox, 1, world=world, run_id="target")
    assert await durable.run_workflow(sender, "target", world=world, run_id="s") == "sent"
    assert await target.result(timeout=30) == [{"from": "sender"}]
    assert await durable.run_workflow(sender, "target", world=worlds.open(), run_id="s") == "sent"
