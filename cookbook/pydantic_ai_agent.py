"""Make a pydantic-ai Agent durable: one capability.

A support agent built with pydantic-ai answers "where is my order?": it
looks the order up, then asks for the parcel's tracking and the carrier's
estimate at once (two tool calls in one model turn), then answers. Its
model is pydantic-ai's offline ``FunctionModel`` with a scripted function,
so the recipe needs no network; any other pydantic-ai model works the same.

Making it durable is one line, ``capabilities=[Durability()]``, and running
``agent.run`` inside a ``@durable.workflow``. Every model request becomes a
recorded model call, every tool call a recorded tool keyed by its
``tool_call_id``. The tools are read-only, which their metadata says
(``tool_options(idempotent=True)``), so a tool cut by a crash is simply
called again.

Run it (needs ``pip install "little-workflow[pydantic-ai]"``):

    python cookbook/pydantic_ai_agent.py

It starts the agent in a child process, kills it with SIGKILL while the
model's last turn is in flight, resumes the same run in this process and
prints how often each model request and tool call really ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _crashdemo as demo

import durable

try:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from durable.integrations.pydantic_ai import Durability, tool_options
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs pydantic-ai: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "where-is-my-order"
READ_ONLY = tool_options(idempotent=True)


async def support_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model: reads the conversation, decides the next step."""
    turn = sum(1 for m in messages if isinstance(m, ModelResponse))
    await demo.ran(f"model-turn-{turn}")
    got = {p.tool_name: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("find_order", {"order_id": "1234"}, tool_call_id="c_order")])
    if turn == 1:
        order = got["find_order"]
        return ModelResponse(
            parts=[
                ToolCallPart("track_parcel", {"tracking_id": order["tracking_id"]}, tool_call_id="c_track"),
                ToolCallPart("carrier_eta", {"carrier": order["carrier"]}, tool_call_id="c_eta"),
            ]
        )
    return ModelResponse(
        parts=[TextPart(f"Your parcel is {got['track_parcel']}; expected {got['carrier_eta']}.")]
    )


agent = Agent(FunctionModel(support_model), name="support", capabilities=[Durability()])  # the one line


@agent.tool_plain(metadata=READ_ONLY)
async def find_order(order_id: str) -> dict[str, str]:
    """Find an order by id."""
    await demo.ran("find_order")
    return {"order_id": order_id, "tracking_id": "TRK-88", "carrier": "Posten"}


@agent.tool_plain(metadata=READ_ONLY)
async def track_parcel(tracking_id: str) -> str:
    """Where a parcel is now."""
    await demo.ran("track_parcel")
    return "at the Oslo depot"


@agent.tool_plain(metadata=READ_ONLY)
async def carrier_eta(carrier: str) -> str:
    """When the carrier expects to deliver."""
    await demo.ran("carrier_eta")
    return "tomorrow before noon"


@durable.workflow
async def support(question: str) -> str:
    return (await agent.run(question)).output


async def attempt(data_dir: Path) -> str:
    with durable.local_world(data_dir) as world:
        return await durable.run_workflow(support, "Where is order 1234?", world=world, run_id=RUN_ID)  # type: ignore[no-any-return]


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="model-turn-2")


if __name__ == "__main__":
    sys.exit(main())
