"""The persisted names of the Agents SDK integration never change; the session manifest lists the agents.

Names are compatibility data: a run in flight recorded them, and the resumed
code must produce the same ones. Change a pin only together with a reviewed
migration of recorded runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")

import durable
from durable.integrations.openai_agents import DurableRunner, _names
from tests.helpers.openai_agents_kit import support_desk


async def _ran(name: str) -> None:
    pass


def test_call_names_are_pinned() -> None:
    """Model calls, tool calls, MCP calls and listings, session reads and writes, compensations."""
    assert _names.MODEL == "openai_agents__model"
    assert _names.MODEL_STREAM == "openai_agents__model_stream"
    assert _names.tool_call("lookup_order") == "openai_agents__tool__lookup_order"
    assert _names.tool_call("look up: order") == "openai_agents__tool__look_up__order"
    assert _names.mcp_call("notes", "read_note") == "openai_agents__mcp__notes__read_note"
    assert _names.mcp_listing("notes") == "openai_agents__mcp__notes__list_tools"
    assert _names.session_op("add_items") == "openai_agents__session__add_items"
    assert _names.tool_undo("charge") == "openai_agents__undo__charge"


def test_the_session_manifest_lists_each_agent_its_tools_handoffs_and_settings() -> None:
    """``session.started`` holds an entry per agent field and per tool, under pinned names."""
    triage, _, _ = support_desk(_ran)

    @durable.workflow
    async def support() -> str:
        return str((await DurableRunner.run(triage, "q")).final_output)

    world = durable.memory_world()
    asyncio.run(durable.run_workflow(support, world=world, run_id="r"))
    (started,) = [e for e in world.events("r") if e.type == "session.started"]
    manifest: dict[str, Any] = started.manifest  # type: ignore[attr-defined]
    tools = {t["name"]: t for t in manifest["availableTools"]}
    assert sorted(tools) == [
        *(
            f"agent__{a}__{f}"
            for a in ("billing", "triage")
            for f in ("handoffs", "instructions", "model", "output", "settings")
        ),
        "lookup_order",
    ]
    assert tools["agent__triage__handoffs"]["signature"] == '() -> ["billing"]'
    assert tools["agent__billing__model"]["signature"] == '() -> "tests.helpers.openai_agents_kit.Deciding"'
    assert (
        tools["lookup_order"]["signature"]
        == '(*, order_id: {"title":"Order Id","type":"string"}) -> function_tool approval=false'
    )
    assert tools["lookup_order"]["options"] == {"idempotent": True}
    assert manifest["role"] == "triage"
