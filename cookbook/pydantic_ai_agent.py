"""Make a pydantic-ai Agent durable.

A support agent built with pydantic-ai answers "where is my order?": it
looks the order up, then asks for the parcel's tracking and the carrier's
estimate at once (two tool calls in one model turn), then answers. Its
model is pydantic-ai's offline ``FunctionModel`` with a scripted function,
so the recipe needs no network; any other pydantic-ai model works the same.

Making it durable:

- ``@durable.tool`` on each tool function, registered with the agent as usual;
- ``DurableModel``: a pydantic-ai ``WrapperModel`` whose request is a
  ``@durable.model_call``. Its identity is the conversation without the
  fields that change on every run (timestamps, run ids), so a resumed run
  matches the recorded requests and gets the recorded responses;
- ``KeyedToolset``: runs each tool call in ``durable.branch(tool_call_id)``,
  so the tool calls pydantic-ai runs in parallel are keyed by the model's
  ``tool_call_id``, not by the order they finish in;
- ``@durable.workflow`` around ``agent.run``, inside ``durable.session``.

Run it (needs ``pip install "little-workflow[agents]"``):

    python cookbook/pydantic_ai_agent.py

It starts the agent in a child process, kills it with SIGKILL while the
model's last turn is in flight, resumes the same run in this process and
prints how often each model request and tool call really ran.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import _crashdemo as demo

import durable

try:
    from pydantic_ai import Agent, FunctionToolset, RunContext, WrapperToolset
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.toolsets import ToolsetTool
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs pydantic-ai: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "where-is-my-order"

# -- the agent, as it was written (plus @durable.tool) -------------------------


async def support_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model: reads the conversation, decides the next step."""
    turn = sum(1 for m in messages if isinstance(m, ModelResponse))
    await demo.ran(f"model-turn-{turn}")
    returns = {
        p.tool_name: p.content
        for m in messages
        for p in getattr(m, "parts", [])
        if isinstance(p, ToolReturnPart)
    }
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("find_order", {"order_id": "1234"}, tool_call_id="c_order")])
    if turn == 1:
        order = returns["find_order"]
        return ModelResponse(
            parts=[
                ToolCallPart("track_parcel", {"tracking_id": order["tracking_id"]}, tool_call_id="c_track"),
                ToolCallPart("carrier_eta", {"carrier": order["carrier"]}, tool_call_id="c_eta"),
            ]
        )
    return ModelResponse(
        parts=[TextPart(f"Your parcel is {returns['track_parcel']}; expected {returns['carrier_eta']}.")]
    )


@durable.tool(idempotent=True)
async def find_order(order_id: str) -> dict[str, str]:
    """Find an order by id."""
    await demo.ran("find_order")
    return {"order_id": order_id, "tracking_id": "TRK-88", "carrier": "Posten"}


@durable.tool(idempotent=True)
async def track_parcel(tracking_id: str) -> str:
    """Where a parcel is now."""
    await demo.ran("track_parcel")
    return "at the Oslo depot"


@durable.tool(idempotent=True)
async def carrier_eta(carrier: str) -> str:
    """When the carrier expects to deliver."""
    await demo.ran("carrier_eta")
    return "tomorrow before noon"


# -- the durable adapters -----------------------------------------------------

VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})


def without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


class DurableModel(WrapperModel):
    """The agent's model, with every request made a durable model call."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Hand the request to the durable model call, without the fields that change per run."""
        conversation = without_volatile(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))
        return await self.durable_request(conversation, model_settings, model_request_parameters)  # type: ignore[no-any-return]

    @durable.model_call(slot="support", name="model_request")
    async def durable_request(
        self,
        conversation: list[dict[str, Any]],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """The real request: recorded once, replayed on resume."""
        messages = ModelMessagesTypeAdapter.validate_python(conversation)
        return await self.wrapped.request(messages, model_settings, model_request_parameters)


class KeyedToolset(WrapperToolset[Any]):
    """Runs each tool call in its own durable branch, keyed by the model's tool_call_id."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Call the tool inside ``durable.branch(tool_call_id)``."""
        async with durable.branch(ctx.tool_call_id):
            return await super().call_tool(name, tool_args, ctx, tool)


TOOLS = [find_order, track_parcel, carrier_eta]
agent = Agent(
    DurableModel(FunctionModel(support_model)),
    toolsets=[KeyedToolset(FunctionToolset(TOOLS))],
)


@durable.workflow
async def support(question: str) -> str:
    async with durable.session("support", tools=TOOLS):
        result = await agent.run(question)
    return result.output


# -- running it ----------------------------------------------------------------


async def attempt(data_dir: Path) -> str:
    with durable.local_world(data_dir) as world:
        return await durable.run_workflow(  # type: ignore[no-any-return]
            support, "Where is order 1234?", world=world, run_id=RUN_ID, models={"support": "scripted"}
        )


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="model-turn-2")


if __name__ == "__main__":
    sys.exit(main())
