"""Events and streams on both backends: set_event/get_event, write_stream/read_stream, stream_to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import durable
from durable import ConfigurationError, NondeterminismError
from durable.testing import SimulatedCrash
from tests.conftest import Worlds


@durable.workflow
async def progress(n: int) -> int:
    for i in range(n):
        durable.set_event("progress", {"done": i + 1, "of": n})
        await durable.write_stream("numbers", i)
        await durable.recv()
    durable.close_stream("numbers")
    await durable.write_stream("after", "late")
    return n


@durable.workflow
async def quick(n: int) -> int:
    for i in range(n):
        await durable.write_stream("s", i)
    durable.set_event("e", "first")
    durable.set_event("e", "last")
    return n


@durable.workflow
async def open_stream() -> str:
    await durable.write_stream("s", "only")
    return "done"


CHUNKS = ["to", "ken", "s"]
MODEL_CALLS: list[int] = []


@durable.model_call(stream_to="tokens")
async def speak(prompt: str) -> AsyncIterator[str]:
    MODEL_CALLS.append(1)
    for c in CHUNKS:
        await asyncio.sleep(0)  # a network read: each chunk reaches the stream before the next
        yield c


@durable.step
async def after_speaking(text: str) -> str:
    return text.upper()


@durable.workflow
async def talker(prompt: str) -> str:
    parts = [c async for c in speak(prompt)]
    return await after_speaking("".join(parts))


@pytest.fixture(autouse=True)
def _reset() -> None:
    MODEL_CALLS.clear()


async def test_get_event_returns_the_last_value_set(worlds: Worlds) -> None:
    """A finished run's event reads as its last value."""
    world = worlds.open()
    await durable.run_workflow(quick, 2, world=world, run_id="q")
    assert await durable.handle("q", world=world).get_event("e") == "last"


async def test_get_event_waits_for_a_live_run_and_sees_later_values(worlds: Worlds) -> None:
    """get_event waits for the first value; after a message the run sets a newer one."""
    world = worlds.open()
    h = durable.start_workflow(progress, 2, world=world)
    assert await h.get_event("progress") == {"done": 1, "of": 2}
    await h.send("go")
    await _until_async(lambda: h.get_event("progress"), {"done": 2, "of": 2})
    await h.send("go")
    assert await h.result(timeout=30) == 2


async def test_get_event_returns_none_on_timeout_or_when_the_run_ended_without_it(worlds: Worlds) -> None:
    """None means the timeout passed, or the run finished and can no longer set it."""
    world = worlds.open()
    h = durable.start_workflow(progress, 1, world=world)
    assert await h.get_event("missing", timeout=0.01) is None
    await h.send("go")
    await h.result(timeout=30)
    assert await h.get_event("missing") is None


async def test_read_stream_of_a_finished_run_yields_what_was_written_and_ends(worlds: Worlds) -> None:
    """A reader of a finished run gets every value in order; start=k skips the first k."""
    world = worlds.open()
    await durable.run_workflow(quick, 5, world=world, run_id="q")
    h = durable.handle("q", world=world)
    assert [v async for v in h.read_stream("s")] == [0, 1, 2, 3, 4]
    assert [v async for v in h.read_stream("s", start=3)] == [3, 4]
    assert [v async for v in h.read_stream("s", start=9)] == []
    assert [v async for v in h.read_stream("other")] == []


async def test_read_stream_is_live_ends_at_close_and_a_reader_reconnects(
    worlds: Worlds,
) -> None:
    """Values arrive while the run runs; a reader that left comes back with start= and misses nothing."""
    world = worlds.open()
    h = durable.start_workflow(progress, 4, world=world)
    got: list[Any] = []
    async for v in h.read_stream("numbers"):
        got.append(v)
        if len(got) == 2:
            break  # the reader disconnects
        await h.send("go")
    await h.send("go")
    rest = []
    async for v in h.read_stream("numbers", start=len(got)):
        rest.append(v)
        await h.send("go")
    assert got + rest == [0, 1, 2, 3]  # the stream closed before the run ended
    assert await h.result(timeout=30) == 4


async def test_a_stream_that_is_never_closed_ends_with_the_run(worlds: Worlds) -> None:
    """A reader does not hang on a finished run's open stream."""
    world = worlds.open()
    h = durable.start_workflow(open_stream, world=world)
    assert [v async for v in h.read_stream("s")] == ["only"]
    assert await h.result(timeout=30) == "done"


async def test_a_replay_writes_no_value_or_event_again(worlds: Worlds) -> None:
    """Resuming a finished run leaves its log as it was."""
    world = worlds.open()
    await durable.run_workflow(quick, 3, world=world, run_id="q")
    before = world.log.read("q")
    await durable.run_workflow(quick, 3, world=worlds.open(), run_id="q")
    assert world.log.read("q") == before


async def test_read_stream_refuses_a_negative_offset(worlds: Worlds) -> None:
    """start= is a count of values already read."""
    world = worlds.open()
    await durable.run_workflow(quick, 1, world=world, run_id="q")
    with pytest.raises(ConfigurationError, match="offset"):
        durable.handle("q", world=world).read_stream("s", start=-1)


async def test_talking_calls_need_a_run_and_names() -> None:
    """set_event, write_stream and close_stream refuse to run outside a run."""
    with pytest.raises(ConfigurationError):
        durable.set_event("k", 1)
    with pytest.raises(ConfigurationError):
        await durable.write_stream("k", 1)
    with pytest.raises(ConfigurationError):
        durable.close_stream("k")


async def test_a_streamed_model_call_mirrors_its_chunks_to_the_stream(worlds: Worlds) -> None:
    """stream_to= writes each chunk to the run's stream as it arrives."""
    world = worlds.open()
    assert await durable.run_workflow(talker, "hi", world=world, run_id="t") == "TOKENS"
    assert [v async for v in durable.handle("t", world=world).read_stream("tokens")] == CHUNKS


async def test_a_reissued_stream_does_not_mirror_its_chunks_twice(worlds: Worlds) -> None:
    """A crash after the chunks reached the stream, before the receipt: the reissue writes none again."""
    cut = worlds.crashing(lambda t, d: t == "effect.receipt")
    with pytest.raises(SimulatedCrash):
        await durable.run_workflow(talker, "hi", world=cut, run_id="u")
    world = worlds.open()
    mirrored = [e.value for e in world.events("u") if e.type == "stream.write"]  # type: ignore[union-attr]
    assert mirrored == CHUNKS[:2]  # the last chunk was lost with the receipt, in one append
    assert await durable.run_workflow(talker, "hi", world=world, run_id="u") == "TOKENS"
    assert len(MODEL_CALLS) == 2  # reissued: its receipt never committed
    assert [v async for v in durable.handle("u", world=world).read_stream("tokens")] == CHUNKS
    assert await durable.run_workflow(talker, "hi", world=worlds.open(), run_id="u") == "TOKENS"
    assert len(MODEL_CALLS) == 2  # a replay of the finished run calls nothing and writes nothing


def test_stream_to_needs_a_streaming_model_call() -> None:
    """A model call that returns one value has no chunks to mirror: refused when decorated."""
    with pytest.raises(ConfigurationError, match="stream_to"):

        @durable.model_call(stream_to="x")
        async def whole(prompt: str) -> str:
            return prompt


async def test_a_replay_that_writes_another_stream_fails_closed(worlds: Worlds) -> None:
    """The recorded write names its stream; code that now writes to another stream raises."""
    world = worlds.open()

    @durable.workflow(name="stream_drift")
    async def first() -> None:
        await durable.write_stream("a", 1)
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        await durable.run_workflow(first, world=world, run_id="d")

    @durable.workflow(name="stream_drift")
    async def second() -> None:
        await durable.write_stream("b", 1)

    with pytest.raises(NondeterminismError):
        await durable.run_workflow(second, world=worlds.open(), run_id="d", retry_failed=True)


async def _until_async(get: Any, want: Any) -> None:
    for _ in range(10_000):
        if await get() == want:
            return
        await asyncio.sleep(0.002)
    raise AssertionError(f"never got {want!r}")


async def test_a_compacted_run_is_read_through_its_snapshot(worlds: Worlds) -> None:
    """After compaction the snapshot holds every stream value, close and event, in order."""
    world = worlds.open()

    @durable.workflow(name="compacted_talk")
    async def talk() -> str:
        for i in range(4):
            await durable.write_stream("s", i)
        durable.close_stream("s")
        await durable.write_stream("t", "other")
        durable.set_event("e", "first")
        durable.set_event("e", "last")
        return "done"

    await durable.run_workflow(talk, world=world, run_id="c")
    durable.compact("c", world=world)
    assert [t for _, t, _ in world.log.read("c")] == ["snapshot"]
    h = durable.handle("c", world=world)
    assert [v async for v in h.read_stream("s")] == [0, 1, 2, 3]
    assert [v async for v in h.read_stream("s", start=2)] == [2, 3]
    assert [v async for v in h.read_stream("t")] == ["other"]  # ends with the run
    assert await h.get_event("e") == "last"
    assert await durable.run_workflow(talk, world=worlds.open(), run_id="c") == "done"
