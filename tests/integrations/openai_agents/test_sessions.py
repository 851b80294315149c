"""Conversation sessions inside runs: no duplicate items after a resume, kept in the world's store."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, SQLiteSession
from agents.testing import assistant_message

import durable
from durable.integrations.openai_agents import DurableRunner, DurableSession
from durable.testing import run_replaying_always
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on
from tests.helpers.openai_agents_kit import Deciding


class Calls(Counter[str]):
    async def __call__(self, name: str) -> None:
        self[name] += 1


def chat_agent(calls: Calls) -> Agent[Any]:
    """Answers with how many items the model saw: history the session gave plus the new message."""
    return Agent(
        name="chat", model=Deciding("chat", lambda c: [assistant_message(f"saw {len(c.input)}")], calls)
    )


def texts(items: list[Any]) -> list[str]:
    return [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in items]


def test_a_durable_session_replayed_after_every_commit_holds_each_item_once(worlds: Worlds) -> None:
    """Two turns of a conversation, resumed after each commit: the session holds the four items, once each."""
    agent = chat_agent(Calls())

    @durable.workflow
    async def talk() -> list[str]:
        session = DurableSession("chat-1")
        first = await DurableRunner.run(agent, "hello", session=session)
        second = await DurableRunner.run(agent, "and again", session=session)
        return [first.final_output, second.final_output]

    world = worlds.open()
    replayed = asyncio.run(run_replaying_always(talk, world=world))
    assert replayed.output == ["saw 1", "saw 3"]
    items = asyncio.run(DurableSession("chat-1", world=world).get_items())
    assert texts(items) == ["hello", "saw 1", "and again", "saw 3"]


def test_an_sdk_session_gets_no_duplicate_items_from_a_resume(worlds: Worlds, tmp_path: Path) -> None:
    """A plain ``SQLiteSession``: its reads and writes replay, so a resumed run adds nothing twice."""
    agent = chat_agent(Calls())
    db = tmp_path / "conversations.db"

    @durable.workflow
    async def talk() -> str:
        session = SQLiteSession("chat-2", db)
        await DurableRunner.run(agent, "hello", session=session)
        return str((await DurableRunner.run(agent, "and again", session=session)).final_output)

    crashing = worlds.crashing(on("effect.intent", "session:chat#1.model"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(talk, world=crashing, run_id="r"))
    assert asyncio.run(durable.run_workflow(talk, world=worlds.open(), run_id="r")) == "saw 3"
    items = asyncio.run(SQLiteSession("chat-2", db).get_items())
    assert texts(items) == ["hello", "saw 1", "and again", "saw 3"]


def test_a_pop_cut_by_a_crash_pops_one_item_when_called_again(worlds: Worlds) -> None:
    """``pop_item`` removed an item, then the crash lost its receipt: called again it returns that item."""
    world = worlds.open()
    seed = DurableSession("chat-3", world=world)
    asyncio.run(seed.add_items([{"role": "user", "content": c} for c in ("a", "b", "c")]))

    @durable.workflow
    async def undo() -> Any:
        return await DurableSession("chat-3").pop_item()

    crashing = worlds.crashing(on("effect.receipt", "pop_item"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(undo, world=crashing, run_id="r"))
    assert asyncio.run(durable.run_workflow(undo, world=worlds.open(), run_id="r")) == {
        "role": "user",
        "content": "c",
    }
    assert texts(asyncio.run(DurableSession("chat-3", world=worlds.open()).get_items())) == ["a", "b"]


def test_a_durable_session_outside_a_run_needs_a_world_and_then_is_a_plain_session(worlds: Worlds) -> None:
    """Without ``world=`` outside a run it says so; with one it reads, writes, limits, pops and clears."""
    with pytest.raises(durable.ConfigurationError, match=r"pass world=\.\.\."):
        asyncio.run(DurableSession("lonely").get_items())
    session = DurableSession("chat-4", world=worlds.open())
    asyncio.run(session.add_items([{"role": "user", "content": c} for c in ("a", "b", "c")]))
    assert texts(asyncio.run(session.get_items(limit=2))) == ["b", "c"]
    assert asyncio.run(session.pop_item()) == {"role": "user", "content": "c"}
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
