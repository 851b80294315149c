"""Make an OpenAI Agents SDK app durable: one line, ``install()``.

A shop's customer-service desk, shaped like the Agents SDK's own customer
service example: a triage agent hands the customer over to the order desk,
which looks the order up and tracks the parcel at once (two tool calls in one
response), then hands over to the refund desk, which refunds the shipping
and says so. The agents name their model (``"gpt-4.1-mini"``) and go through
the SDK's default OpenAI provider and client; to stay offline, the recipe
points that client at a scripted Responses API on 127.0.0.1
(``_scripted_api.py``), so every model call is a real HTTP request.

Making it durable:

- ``install()``, once: inside a ``@durable.workflow``, ``Runner.run`` records
  every model response of every agent and every tool call, keyed by its place
  in its response; handoffs and the final output replay without calling anything;
- ``tool_options(issue_refund, idempotent=True)``: the refund carries
  ``durable.idempotency_key()``, so the payment provider drops a repeated one
  and a refund cut by a crash can be sent again; the read-only tools say so too;
- ``@durable.workflow`` on the function that runs the desk.

Run it (needs ``pip install "little-workflow[openai-agents]"``):

    python cookbook/openai_agents_support.py

It starts the desk in a child process, kills it with SIGKILL while the refund
desk's last model request is in flight, resumes the run in this process and
prints how often each HTTP request and tool call really happened.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import _crashdemo as demo
from _scripted_api import Reply, Request, ScriptedAPI, ToolCall

import durable

try:
    from agents import (
        Agent,
        RunContextWrapper,
        Runner,
        function_tool,
        handoff,
        set_default_openai_api,
        set_default_openai_client,
        set_trace_processors,
    )
    from agents.extensions.handoff_prompt import RECOMMENDED_PROMPT_PREFIX
    from openai import AsyncOpenAI

    from durable.integrations.openai_agents import install, tool_options
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs the OpenAI Agents SDK: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "late-parcel"
ANSWER = "Your parcel TRK-88 is at the Oslo depot, due tomorrow. I refunded the 4.99 shipping (R-1234)."

install()  # the one line: Runner.run is durable inside a workflow, unchanged outside one


# -- the app, as the SDK's examples write one ---------------------------------------------


@dataclass
class ShopContext:
    customer: str
    order_id: str | None = None


@function_tool
async def lookup_order(ctx: RunContextWrapper[ShopContext], order_id: str) -> str:
    """Look an order up by its id."""
    await demo.ran("lookup_order")
    ctx.context.order_id = order_id
    return f"order {order_id}: a rain jacket, shipped with tracking id TRK-88, shipping 4.99"


@function_tool
async def track_parcel(tracking_id: str) -> str:
    """Where a parcel is now."""
    await demo.ran("track_parcel")
    return f"{tracking_id}: at the Oslo depot, due tomorrow"


@function_tool
async def issue_refund(order_id: str, amount: float) -> str:
    """Refund an amount of an order to the customer's card."""
    await demo.ran("issue_refund")
    key = durable.idempotency_key()  # sent to the payment provider, which drops a repeat
    return f"refund R-{order_id} of {amount} accepted (idempotency key ...{key[-12:]})"


for read_only in (lookup_order, track_parcel):
    tool_options(read_only, idempotent=True)
tool_options(issue_refund, idempotent=True)

refund_desk = Agent[ShopContext](
    name="Refund desk",
    handoff_description="Refunds shipping or orders.",
    instructions=f"{RECOMMENDED_PROMPT_PREFIX} You refund what the customer is owed, then tell them.",
    model="gpt-4.1-mini",
    tools=[issue_refund],
)


async def on_order_desk(ctx: RunContextWrapper[ShopContext]) -> None:
    ctx.context.order_id = None  # the order desk finds the order itself


order_desk = Agent[ShopContext](
    name="Order desk",
    handoff_description="Finds orders and parcels.",
    instructions=f"{RECOMMENDED_PROMPT_PREFIX} You find the order and its parcel, then hand refunds over.",
    model="gpt-4.1-mini",
    tools=[lookup_order, track_parcel],
    handoffs=[refund_desk],
)

triage = Agent[ShopContext](
    name="Triage",
    instructions=f"{RECOMMENDED_PROMPT_PREFIX} You route each customer to the right desk.",
    model="gpt-4.1-mini",
    handoffs=[handoff(order_desk, on_handoff=on_order_desk), refund_desk],
)


@durable.workflow
async def support(message: str) -> str:
    result = await Runner.run(triage, message, context=ShopContext(customer="ada"))
    return str(result.final_output)


# -- the scripted Responses API the SDK talks to, offline ---------------------------------


def desk_model(request: Request) -> Reply:
    """The stand-in for the model: answers each turn of the conversation from a script."""
    demo.reached(f"http-request-turn-{request.turn}")
    if request.turn == 0:
        return Reply(tool_calls=[ToolCall("call_h1", "transfer_to_order_desk", {})])
    if request.turn == 1:
        return Reply(
            tool_calls=[
                ToolCall("call_order", "lookup_order", {"order_id": "1234"}),
                ToolCall("call_track", "track_parcel", {"tracking_id": "TRK-88"}),
            ]
        )
    if request.turn == 3:
        return Reply(tool_calls=[ToolCall("call_h2", "transfer_to_refund_desk", {})])
    if request.turn == 4:
        refund = {"order_id": "1234", "amount": 4.99}
        return Reply(tool_calls=[ToolCall("call_refund", "issue_refund", refund)])
    return Reply(text=ANSWER)


async def attempt(data_dir: Path) -> str:
    with ScriptedAPI(desk_model) as api, durable.local_world(data_dir) as world:
        client = AsyncOpenAI(base_url=f"{api.url}/v1", api_key="offline", max_retries=0)
        set_default_openai_client(client, use_for_tracing=False)
        set_default_openai_api("responses")
        set_trace_processors([])  # nothing leaves the machine
        try:
            message = "Where is order 1234? It is late: please refund the shipping."
            return await durable.run_workflow(support, message, world=world, run_id=RUN_ID)  # type: ignore[no-any-return]
        finally:
            await client.close()


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="http-request-turn-5")


if __name__ == "__main__":
    sys.exit(main())
