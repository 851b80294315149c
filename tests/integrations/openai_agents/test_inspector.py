"""The inspector on an agent run: each agent's calls in the tree, approvals answered from it."""

from __future__ import annotations

import asyncio
import html
import re
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("starlette.testclient")

from starlette import testclient

import durable
from durable.integrations.openai_agents import DurableRunner
from durable.ui._app import Inspector, create_app
from durable.ui._pages import run_href
from tests.conftest import Worlds
from tests.helpers.openai_agents_kit import ANSWER, boss_desk, refund_desk

TOKEN = "s3cret"


class Calls(Counter[str]):
    async def __call__(self, name: str) -> None:
        self[name] += 1


def page(world: durable.World, run_id: str) -> str:
    client = testclient.TestClient(create_app(Inspector(world, TOKEN, {})), base_url="http://127.0.0.1:8787")
    got = client.get(run_href(run_id))  # on loopback a page reads without the token
    assert got.status_code == 200, got.text
    return str(got.text)


def depths(text: str) -> dict[str, int]:
    """Each call row's depth in the tree, by its key."""
    rows = {}
    for attrs in re.findall(r'<tr class="item" ([^>]*)>', text):
        d = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
        rows[html.unescape(d["data-key"])] = int(d["data-depth"])
    return rows


def test_the_tree_nests_each_agent_s_model_and_tool_calls_under_its_session(worlds: Worlds) -> None:
    """The boss's session holds its model calls and its tool call; the agent it asked sits below that call."""
    boss = boss_desk(Calls())

    @durable.workflow
    async def ask() -> str:
        return str((await DurableRunner.run(boss, "ask")).final_output)

    world = worlds.open()
    out = asyncio.run(durable.run_workflow(ask, world=world, run_id="r"))
    assert out.startswith("billing says: " + ANSWER)
    rows = depths(page(world, "r"))
    tool = "session:boss#0.turn-0[0].tool:openai_agents__tool__ask_billing#0"
    nested = f"{tool}.session:billing#0"
    assert rows["session:boss#0"] == 0
    assert rows["session:boss#0.model:openai_agents__model#0"] == 1
    assert rows["session:boss#0.model:openai_agents__model#1"] == 1
    assert rows[tool] == rows["session:boss#0.turn-0[0]"] + 1
    assert rows[nested] == rows[tool] + 1
    assert rows[f"{nested}.model:openai_agents__model#0"] == rows[nested] + 1
    lookups = [k for k in rows if k.startswith(f"{nested}.turn-0[") and k.endswith("lookup_order#0")]
    assert len(lookups) == 2
    assert all(rows[k] > rows[nested] for k in lookups)


def test_pending_approvals_are_shown_and_answered_from_the_inspector(worlds: Worlds) -> None:
    """The waiting run's page names each refund and its arguments; an answer posted there decides each."""
    calls = Calls()
    agent = refund_desk(calls)

    @durable.workflow
    async def refunds() -> str:
        return str((await DurableRunner.run(agent, "refund both")).final_output)

    world = worlds.open()
    with pytest.raises(durable.RunInterrupted) as waiting:
        asyncio.run(durable.run_workflow(refunds, world=world, run_id="r"))
    text = html.unescape(page(world, "r"))
    assert '"tool": "refund"' in text and '"order_id": "B2"' in text
    client = testclient.TestClient(create_app(Inspector(world, TOKEN, {})), base_url="http://127.0.0.1:8787")
    got = client.post(
        "/action/answer",
        data={"id": "r", "path": waiting.value.path, "answer": '{"r1": true, "r2": false}', "token": TOKEN},
        follow_redirects=False,
    )
    assert got.status_code == 303, got.text
    out: Any = asyncio.run(durable.run_workflow(refunds, world=worlds.open(), run_id="r"))
    assert out.startswith("refunded 5 on A1 | ")
    assert (calls["refund-A1"], calls["refund-B2"]) == (1, 0)
