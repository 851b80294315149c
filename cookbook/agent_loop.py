"""Make a hand-written tool-calling agent loop durable.

The agent below was written without durable: a model is asked what to do,
the tools it asks for run (several at once when it asks for several), their
results go back into the conversation, and the loop repeats until the model
answers. The model here is scripted, so the recipe runs offline, but it is
called exactly as a real one would be: with the whole conversation.

Making it durable took decorators and one ``async with``:

- ``@durable.model_call`` on the function that asks the model,
- ``@durable.tool`` on each tool,
- ``@durable.workflow`` on the loop, whose body opens
  ``durable.session("worker", tools=[...])``,
- ``durable.branch(call_id)`` around each tool call of a turn, so parallel
  calls are keyed by the model's ``tool_call_id``, not by finishing order.

Run it:

    python cookbook/agent_loop.py

It starts the agent in a child process, kills it with SIGKILL while the
model's third turn is in flight, resumes the same run in this process and
prints how often each model and tool call really ran: every committed call
once, only the one cut by the kill twice.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import _crashdemo as demo

import durable

RUN_ID = "trip-planner"

# -- the agent, as it was written (plus the decorators) -----------------------

WEATHER = {"Oslo": "4 °C and rain", "Lisbon": "21 °C and sun"}


@durable.model_call(slot="worker")
async def ask_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A scripted model: it reads the conversation and decides the next step."""
    turn = sum(1 for m in messages if m["role"] == "assistant")
    await demo.ran(f"model-turn-{turn}")
    if turn == 0:
        return {
            "content": None,
            "tool_calls": [
                {"id": "call_oslo", "name": "get_weather", "arguments": {"city": "Oslo"}},
                {"id": "call_lisbon", "name": "get_weather", "arguments": {"city": "Lisbon"}},
            ],
        }
    if turn == 1:
        seen = [m["content"] for m in messages if m["role"] == "tool"]
        return {
            "content": None,
            "tool_calls": [{"id": "call_pack", "name": "packing_list", "arguments": {"weather": seen}}],
        }
    packed = next(m["content"] for m in reversed(messages) if m["role"] == "tool")
    return {"content": f"Pack: {packed}.", "tool_calls": []}


@durable.tool(idempotent=True)
async def get_weather(city: str) -> str:
    await demo.ran(f"get_weather-{city}")
    return f"{city}: {WEATHER[city]}"


@durable.tool(idempotent=True)
async def packing_list(weather: list[str]) -> str:
    await demo.ran("packing_list")
    items = ["passport"]
    items += ["umbrella"] if any("rain" in w for w in weather) else []
    items += ["sunglasses"] if any("sun" in w for w in weather) else []
    return ", ".join(items)


TOOLS = {"get_weather": get_weather, "packing_list": packing_list}


async def run_tool(call: dict[str, Any]) -> dict[str, Any]:
    async with durable.branch(call["id"]):  # keyed by the model's tool_call_id
        result = await TOOLS[call["name"]](**call["arguments"])
    return {"role": "tool", "tool_call_id": call["id"], "content": result}


@durable.workflow
async def trip_agent(question: str) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    async with durable.session("worker", tools=list(TOOLS.values())):
        while True:
            reply = await ask_model(messages)
            messages.append({"role": "assistant", **reply})
            if not reply["tool_calls"]:
                return str(reply["content"])
            messages += await asyncio.gather(*(run_tool(c) for c in reply["tool_calls"]))


# -- running it ----------------------------------------------------------------

QUESTION = "I fly to Oslo, then Lisbon. What should I pack?"


async def attempt(data_dir: Path) -> str:
    with durable.local_world(data_dir) as world:
        return await durable.run_workflow(  # type: ignore[no-any-return]
            trip_agent, QUESTION, world=world, run_id=RUN_ID, models={"worker": "scripted-1"}
        )


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="model-turn-2")


if __name__ == "__main__":
    sys.exit(main())
