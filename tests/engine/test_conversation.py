"""A long agent conversation: the log grows with new content, not with the history."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

import durable
from durable.ops._call_inputs import input_artifacts
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


def build(calls: Counter[str]) -> Any:
    """An agent loop: each turn the model reads the whole history and asks for one tool call."""

    @durable.model_call(slot="worker", name="chat")
    async def chat(messages: list[dict[str, str]]) -> dict[str, str]:
        calls["model"] += 1
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return {"role": "assistant", "content": f"turn {turn}: look up item {turn * 7 % 101}"}

    @durable.tool(name="lookup")
    async def lookup(item: str) -> str:
        calls["tool"] += 1
        return f"item {item} is in stock"

    @durable.workflow(name="chat-loop")
    async def loop(turns: int) -> int:
        messages = [{"role": "user", "content": "keep checking the stock"}]
        async with durable.session("worker", tools=[lookup]):
            for _ in range(turns):
                reply = await chat(messages)
                messages.append(reply)
                result = await lookup(reply["content"].rsplit(" ", 1)[1])
                messages.append({"role": "tool", "content": result})
        return len(messages)

    return loop


def log_bytes(world: durable.World, run_id: str) -> int:
    return sum(len(t) + len(d) for _, t, d in world.log.read(run_id))


def artifact_bytes(world: durable.World, run_id: str) -> int:
    """The bytes of the artifacts the run's call inputs are stored in."""
    shas = input_artifacts(durable.recover(run_id, world=world), run_id, world.log.read(run_id))
    return sum(len(world.artifacts.get(sha) or b"") for sha in shas)


def test_500_turn_log_grows_linearly(worlds: Worlds) -> None:
    """Doubling the turns about doubles the log: each response is stored once, the history as deltas."""
    calls: Counter[str] = Counter()
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(build(calls), 250, world=world, run_id="half")) == 501
    assert asyncio.run(durable.run_workflow(build(calls), 500, world=world, run_id="full")) == 1001
    half, full = log_bytes(world, "half"), log_bytes(world, "full")
    assert 1.9 < full / half < 2.1
    rows = world.log.read("full")
    text = "".join(d for _, _, d in rows)
    assert text.count("turn 499: look up item") == 1  # the last response is stored once
    # The history is in each model call's input: whole while short, then what each turn appended.
    chats = [json.loads(d) for _, t, d in rows if t == "effect.intent" and "model:chat" in d]
    inline = [c for c in chats if "input" in c]
    assert 0 < len(inline) < 20 and text.count("keep checking the stock") == len(inline)
    assert "artifact" in chats[len(inline)]["input_ref"]  # the first long one, whole beside the log
    assert all(len(c["input_ref"]["append"]["messages"]) == 2 for c in chats[len(inline) + 1 :])
    assert artifact_bytes(world, "full") < 2 * 1024  # the first long input, nothing per turn
    assert calls == Counter({"model": 750, "tool": 750})


def test_500_turn_conversation_resumes_at_the_last_turn(worlds: Worlds) -> None:
    """Cut at the last turn, the resume replays 499 turns from the log and calls only the last."""
    calls: Counter[str] = Counter()
    wf = build(calls)
    crashing = worlds.crashing(on("effect.intent", "tool:lookup#999"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, 500, world=crashing, run_id="r"))
    assert calls == Counter({"model": 500, "tool": 499})
    calls.clear()
    assert asyncio.run(durable.run_workflow(wf, 500, world=worlds.open(), run_id="r")) == 1001
    assert calls == Counter({"model": 1, "tool": 1})  # turn 499's reply was not yet durable
