"""Make code that uses the official ``anthropic`` client durable: wrap the client.

A travel agent asks Claude what to pack: the model asks for the weather in
two cities at once (two ``tool_use`` blocks in one turn), then writes the
packing list, streamed through the SDK's ``messages.stream(...)`` helper. It
uses the real ``anthropic.AsyncAnthropic`` client against a scripted
Anthropic-compatible server on 127.0.0.1 (``_scripted_api.py``), so every
model call is a real HTTP request made offline.

Making it durable: ``wrap(client)`` (inside a run ``messages.create`` and
``messages.stream`` are recorded model calls, rebuilt as the SDK's own
``Message`` and stream events on replay), ``@durable.tool`` on the tool,
``durable.branch(block.id)`` around each tool call, ``@durable.workflow`` on
the loop.

Run it (needs ``pip install "little-workflow[anthropic]"``):

    python cookbook/anthropic_client.py

It starts the agent in a child process, kills it with SIGKILL while the
second model request is in flight, resumes the run in this process and prints
how often each HTTP request and tool call really happened.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import _crashdemo as demo
from _scripted_api import Reply, Request, ScriptedAPI, ToolCall

import durable

try:
    from anthropic import AsyncAnthropic

    from durable.integrations.anthropic import wrap
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs the anthropic package: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "pack-for-the-trip"
TOOLS: Any = [
    {"name": "weather", "description": "The weather in a city.", "input_schema": {"type": "object"}}
]


def scripted_model(request: Request) -> Reply:
    """The stand-in for the API: asks for the weather in both cities, then answers."""
    demo.reached(f"http-request-turn-{request.turn}")
    if request.turn == 0:
        return Reply(tool_calls=[ToolCall(f"toolu_{c}", "weather", {"city": c}) for c in ("Oslo", "Lisbon")])
    return Reply(text="Pack an umbrella for Oslo and sunglasses for Lisbon.")


client: AsyncAnthropic  # set by attempt(): wrap(AsyncAnthropic(...)) pointed at the local server


@durable.tool(idempotent=True)
async def weather(city: str) -> str:
    await demo.ran(f"weather-{city}")
    return {"Oslo": "rain", "Lisbon": "sun"}[city]


async def run_tool(block: Any) -> dict[str, Any]:
    async with durable.branch(block.id):  # keyed by the model's tool_use id
        result = await weather(**block.input)
    return {"type": "tool_result", "tool_use_id": block.id, "content": result}


@durable.workflow
async def packing(question: str) -> str:
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:
        async with client.messages.stream(
            model="travel", max_tokens=500, messages=messages, tools=TOOLS
        ) as s:
            reply = await s.get_final_message()
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
        )
        uses = [b for b in reply.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in reply.content if b.type == "text").strip()
        messages.append({"role": "user", "content": list(await asyncio.gather(*(run_tool(b) for b in uses)))})


async def attempt(data_dir: Path) -> str:
    global client
    with ScriptedAPI(scripted_model) as api, durable.local_world(data_dir) as world:
        client = wrap(AsyncAnthropic(base_url=api.url, api_key="offline", max_retries=0))
        try:
            return await durable.run_workflow(  # type: ignore[no-any-return]
                packing,
                "What should I pack?",
                world=world,
                run_id=RUN_ID,
                models={"travel": "claude-sonnet-4-5"},
            )
        finally:
            await client.close()


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="http-request-turn-1")


if __name__ == "__main__":
    sys.exit(main())
