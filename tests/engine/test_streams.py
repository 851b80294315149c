"""Streaming model calls: chunks in stream.cursor events, replayed; a cut stream is reissued."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

import durable
from durable.engine._recorded import Recorded
from durable.engine._streams import CURSOR_BATCH
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash

N = CURSOR_BATCH + 8  # long enough for one non-terminal cursor before the terminal one


def build(calls: Counter[str], n: int = N, stop_after: int | None = None, pause: bool = False) -> Any:
    @durable.model_call(slot="worker", name="talk")
    async def talk(prompt: str) -> AsyncIterator[str]:
        calls["talk"] += 1
        for i in range(n):
            await asyncio.sleep(0)  # one event-loop turn per chunk, as a network stream has
            yield f"{prompt}{i} "

    @durable.workflow(name="w")
    async def w(prompt: str) -> str:
        async with durable.session("worker"):
            parts = []
            async with contextlib.aclosing(talk(prompt)) as stream:  # closed even on break
                async for chunk in stream:
                    parts.append(chunk)
                    if stop_after is not None and len(parts) == stop_after:
                        break
            if pause:
                durable.interrupt("pause")
            return "".join(parts)

    return w


def expected(n: int = N, prompt: str = "t") -> str:
    return "".join(f"{prompt}{i} " for i in range(n))


def test_stream_records_chunks_and_a_terminal_cursor(world: durable.World) -> None:
    """Chunks go to stream.cursor events, the last one terminal, then the receipt."""
    out = asyncio.run(durable.run_workflow(build(Counter()), "t", world=world, run_id="r"))
    assert out == expected()
    events = [e for e in world.events("r") if e.type in ("stream.cursor", "effect.receipt")]
    assert [(e.type, getattr(e, "chunks", None), getattr(e, "terminal", None)) for e in events] == [
        ("stream.cursor", CURSOR_BATCH, False),
        ("stream.cursor", N, True),
        ("effect.receipt", None, None),
    ]
    cursors = [e for e in events if e.type == "stream.cursor"]
    assert sum(len(c.data) for c in cursors) == N  # each chunk stored once


def test_replay_yields_recorded_chunks_without_calling(worlds: Worlds) -> None:
    """A finished stream replays from the log; the model is not asked again."""
    calls: Counter[str] = Counter()
    wf = build(calls, pause=True)
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(wf, "t", world=worlds.open(), run_id="r"))
    out = asyncio.run(durable.run_workflow(wf, "t", world=worlds.open(), run_id="r", resume="go"))
    assert out == expected()
    assert calls["talk"] == 1


def test_cut_stream_is_reissued_from_the_start(worlds: Worlds) -> None:
    """A crash before the terminal cursor loses the stream; the resume asks again, from chunk 0."""
    calls: Counter[str] = Counter()
    wf = build(calls)
    crashing = worlds.crashing(lambda t, d: t == "stream.cursor" and d["terminal"] is True)
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, "t", world=crashing, run_id="r"))
    world = worlds.open()
    partial = Recorded.from_rows(world.log.read("r")).streams["session:worker#0.model:talk#0"]
    assert (partial["chunks"], partial["terminal"]) == (CURSOR_BATCH, False)
    assert asyncio.run(durable.run_workflow(wf, "t", world=world, run_id="r")) == expected()
    assert calls["talk"] == 2
    replayed = Recorded.from_rows(world.log.read("r")).streams["session:worker#0.model:talk#0"]
    assert replayed["data"] == [f"t{i} " for i in range(N)]  # the second attempt alone


def test_consumer_that_stops_early_records_what_it_saw(worlds: Worlds) -> None:
    """Breaking out of the stream makes the chunks seen so far its recorded outcome."""
    calls: Counter[str] = Counter()
    wf = build(calls, stop_after=3)
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(wf, "t", world=world, run_id="r")) == expected(3)
    rec = Recorded.from_rows(world.log.read("r"))
    key = "session:worker#0.model:talk#0"
    assert rec.streams[key]["data"] == ["t0 ", "t1 ", "t2 "]
    assert rec.receipts[key]["result"] == {"chunks": 3}


class Delta(BaseModel):
    text: str
    index: int


def test_typed_chunks_replay_as_their_type(worlds: Worlds) -> None:
    """Chunks annotated as a pydantic model come back as that model on replay."""
    calls: Counter[str] = Counter()
    seen: list[Any] = []

    @durable.model_call(name="deltas")
    async def deltas(n: int) -> AsyncIterator[Delta]:
        calls["deltas"] += 1
        for i in range(n):
            yield Delta(text=str(i), index=i)

    @durable.workflow(name="w")
    async def w(n: int) -> int:
        async for d in deltas(n):
            seen.append(d)
        durable.interrupt("pause")
        return n

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(w, 3, world=worlds.open(), run_id="r"))
    seen.clear()
    assert asyncio.run(durable.run_workflow(w, 3, world=worlds.open(), run_id="r", resume=1)) == 3
    assert seen == [Delta(text="0", index=0), Delta(text="1", index=1), Delta(text="2", index=2)]
    assert calls["deltas"] == 1


def test_stream_error_is_recorded_and_replayed(worlds: Worlds) -> None:
    """A model stream that fails is recorded; the replay raises the same error without calling."""
    calls: Counter[str] = Counter()

    @durable.model_call(name="flaky")
    async def flaky() -> AsyncIterator[str]:
        calls["flaky"] += 1
        yield "a"
        raise ValueError("rate limited")

    @durable.workflow(name="w")
    async def w() -> str:
        try:
            async for _ in flaky():
                pass
        except ValueError as exc:
            durable.interrupt("pause")
            return str(exc)
        return "no error"

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(w, world=worlds.open(), run_id="r"))
    assert asyncio.run(durable.run_workflow(w, world=worlds.open(), run_id="r", resume=1)) == "rate limited"
    assert calls["flaky"] == 1


def test_cursors_of_two_attempts_never_mix() -> None:
    """A cursor whose batch starts at chunk 0 begins a new attempt in the replay index."""
    rec = Recorded()
    rec.add_cursor({"key": "k", "chunks": 2, "terminal": False, "data": ["a", "b"]})
    rec.add_cursor({"key": "k", "chunks": 3, "terminal": False, "data": ["c"]})
    rec.add_cursor({"key": "k", "chunks": 1, "terminal": False, "data": ["x"]})
    rec.add_cursor({"key": "k", "chunks": 2, "terminal": True, "data": ["y"]})
    assert rec.streams["k"]["data"] == ["x", "y"]
    assert rec.streams["k"]["terminal"] is True
