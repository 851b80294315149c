"""A child-process agent for the integration crash tests.

Usage: python -m tests.helpers.procs.integration_agent KIND DATA_DIR [API_URL] [STOP_AT]

KIND is ``openai`` or ``anthropic`` (a tool-calling loop over a client
wrapped with ``durable.integrations.<kind>.wrap``, talking to the parent's
scripted API at API_URL) or ``pydantic`` (a pydantic-ai Agent with
``Durability()`` over a ``FunctionModel``; API_URL is ``-``). Each turn asks
for two tools at once, then the model answers. Every tool body (and the
pydantic-ai model function) appends its name to ``DATA_DIR/bodies.log``
(fsynced); at ``STOP_AT`` the process prints ``STOPPED <name>`` and waits to
be killed. On success it prints ``{"output": ...}``. KIND ``delegating`` is a
pydantic-ai agent whose tool runs another agent (its model turns are
``expert-model-<turn>``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import durable

KIND = sys.argv[1]
DATA = Path(sys.argv[2])
URL = sys.argv[3] if len(sys.argv) > 3 else "-"
STOP_AT = sys.argv[4] if len(sys.argv) > 4 else ""
CITIES = ["oslo", "lisbon"]


def seen() -> list[str]:
    log = DATA / "bodies.log"
    return log.read_text().split() if log.exists() else []


def body(name: str) -> None:
    with open(DATA / "bodies.log", "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


async def ran(name: str) -> None:
    """Count one real run of ``name``; stop there (once) when the parent asked."""
    body(name)
    if name == STOP_AT and seen().count(name) == 1:
        for _ in range(3):  # event-loop turns (no time passes) so finished work is written
            await asyncio.sleep(0)
        print(f"STOPPED {name}", flush=True)
        await asyncio.Event().wait()


async def weather(city: str) -> str:
    await ran(f"weather-{city}")
    return {"oslo": "rain", "lisbon": "sun"}[city]


# -- openai ----------------------------------------------------------------------------


async def openai_agent() -> str:
    from openai import AsyncOpenAI

    from durable.integrations.openai import wrap

    client = wrap(AsyncOpenAI(base_url=URL + "/v1", api_key="offline", max_retries=0))
    tools = durable.tool(idempotent=True)(weather)

    async def call(c: Any) -> dict[str, Any]:
        async with durable.branch(c.id):
            out = await tools(**json.loads(c.function.arguments))
        return {"role": "tool", "tool_call_id": c.id, "content": out}

    @durable.workflow
    async def trip(q: str) -> str:
        messages: list[Any] = [{"role": "user", "content": q}]
        while True:
            reply = (await client.chat.completions.create(model="trip", messages=messages)).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return str(reply.content)
            messages += await asyncio.gather(*(call(c) for c in reply.tool_calls))

    try:
        with durable.local_world(DATA) as world:
            return str(
                await durable.run_workflow(trip, "pack?", world=world, run_id="r", models={"trip": "gpt-x"})
            )
    finally:
        await client.close()


# -- anthropic -------------------------------------------------------------------------


async def anthropic_agent() -> str:
    from anthropic import AsyncAnthropic

    from durable.integrations.anthropic import wrap

    client = wrap(AsyncAnthropic(base_url=URL, api_key="offline", max_retries=0))
    tools = durable.tool(idempotent=True)(weather)

    async def call(block: Any) -> dict[str, Any]:
        async with durable.branch(block.id):
            out = await tools(**block.input)
        return {"type": "tool_result", "tool_use_id": block.id, "content": out}

    @durable.workflow
    async def trip(q: str) -> str:
        messages: list[Any] = [{"role": "user", "content": q}]
        while True:
            async with client.messages.stream(model="trip", max_tokens=99, messages=messages) as stream:
                reply = await stream.get_final_message()
            messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
            )
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                return "".join(b.text for b in reply.content if b.type == "text").strip()
            messages.append({"role": "user", "content": list(await asyncio.gather(*(call(b) for b in uses)))})

    try:
        with durable.local_world(DATA) as world:
            return str(
                await durable.run_workflow(
                    trip, "pack?", world=world, run_id="r", models={"trip": "claude-x"}
                )
            )
    finally:
        await client.close()


# -- pydantic-ai -----------------------------------------------------------------------


async def pydantic_agent() -> str:
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from durable.integrations.pydantic_ai import Durability, tool_options

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        await ran(f"model-{turn}")
        if turn == 0:
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": c}, tool_call_id=f"w_{c}") for c in CITIES]
            )
        got = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(f"pack for {' and '.join(got)}")])

    toolset: FunctionToolset[None] = FunctionToolset(id="weather")
    toolset.add_function(weather, metadata=tool_options(idempotent=True))
    agent = Agent(FunctionModel(model), name="trip", toolsets=[toolset], capabilities=[Durability()])

    @durable.workflow
    async def trip(q: str) -> str:
        return (await agent.run(q)).output

    with durable.local_world(DATA) as world:
        return str(await durable.run_workflow(trip, "pack?", world=world, run_id="r"))


async def delegating_agent() -> str:
    """A lead agent whose (not idempotent) tool runs an expert agent: two requests and a tool of its own."""
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from durable.integrations.pydantic_ai import Durability

    def returned(messages: list[ModelMessage]) -> list[Any]:
        return [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]

    async def expert_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        await ran(f"expert-model-{turn}")
        if turn == 0:
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": c}, tool_call_id=f"w_{c}") for c in CITIES]
            )
        return ModelResponse(parts=[TextPart(f"pack for {' and '.join(returned(messages))}")])

    weather_tools: FunctionToolset[None] = FunctionToolset([weather], id="weather")
    expert = Agent(
        FunctionModel(expert_model), name="expert", toolsets=[weather_tools], capabilities=[Durability()]
    )

    async def ask_expert(question: str) -> str:
        """Ask the weather expert."""
        await ran("ask_expert")
        return (await expert.run(question)).output

    async def lead_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        await ran(f"lead-model-{turn}")
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart("ask_expert", {"question": "pack?"}, tool_call_id="x1")])
        return ModelResponse(parts=[TextPart(str(returned(messages)[0]))])

    team: FunctionToolset[None] = FunctionToolset([ask_expert], id="team")
    lead = Agent(FunctionModel(lead_model), name="lead", toolsets=[team], capabilities=[Durability()])

    @durable.workflow
    async def trip(q: str) -> str:
        return (await lead.run(q)).output

    with durable.local_world(DATA) as world:
        return str(await durable.run_workflow(trip, "pack?", world=world, run_id="r"))


AGENTS = {
    "openai": openai_agent,
    "anthropic": anthropic_agent,
    "pydantic": pydantic_agent,
    "delegating": delegating_agent,
}

if __name__ == "__main__":
    print(json.dumps({"output": asyncio.run(AGENTS[KIND]())}), flush=True)
