"""A pydantic-ai Agent whose tools come from an MCP server: the listing and the calls are recorded.

A trip planner reads the travel note kept for Oslo from a notes server and
saves a new one; the server is a real MCP server (``_notes_mcp_server.py``)
that the agent starts as a child process and talks to over stdio, offline.
The model is pydantic-ai's scripted ``FunctionModel``.

Making it durable is the same one line as for any pydantic-ai agent,
``capabilities=[Durability()]``, with an ``id`` on the MCP toolset (it names
the toolset's durable calls, so keep it stable). The server's tool listing
(``get_tools``) and each tool call are recorded: a resumed run sees the tools
the first run saw and never sends a committed call to the server again, so
``save_note`` (a write) is not repeated.

Run it (needs ``pip install "little-workflow[pydantic-ai]"``):

    python cookbook/mcp_agent.py

It starts the agent in a child process, kills it with SIGKILL while the
model's last turn is in flight, resumes the run in this process and prints
how often each model request and MCP tool call really ran (the server counts
its own calls).
"""

from __future__ import annotations

import sys
from pathlib import Path

import _crashdemo as demo

import durable

try:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from durable.integrations.pydantic_ai import Durability
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs pydantic-ai with MCP: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "plan-the-trip"
SERVER = Path(__file__).with_name("_notes_mcp_server.py")


async def planner_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model: read the note, save a new one, answer."""
    turn = sum(1 for m in messages if isinstance(m, ModelResponse))
    await demo.ran(f"model-turn-{turn}")
    got = {p.tool_name: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("read_note", {"city": "Oslo"}, tool_call_id="c_read")])
    if turn == 1:
        note = {"city": "Oslo", "text": "umbrella packed"}
        return ModelResponse(parts=[ToolCallPart("save_note", note, tool_call_id="c_save")])
    return ModelResponse(parts=[TextPart(f"{got['read_note']} ({got['save_note']})")])


def planner(counts: Path) -> Agent[None, str]:
    notes = MCPToolset(StdioTransport(command=sys.executable, args=[str(SERVER), str(counts)]), id="notes")
    return Agent(FunctionModel(planner_model), name="planner", toolsets=[notes], capabilities=[Durability()])


async def attempt(data_dir: Path) -> str:
    agent = planner(data_dir / "calls.log")  # the MCP server counts its calls with the recipe's

    @durable.workflow
    async def plan(question: str) -> str:
        return (await agent.run(question)).output

    with durable.local_world(data_dir) as world:
        return await durable.run_workflow(plan, "Plan my Oslo trip.", world=world, run_id=RUN_ID)  # type: ignore[no-any-return]


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="model-turn-2")


if __name__ == "__main__":
    sys.exit(main())
