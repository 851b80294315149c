"""Make code that uses the official ``openai`` client durable: wrap the client.

An on-call agent asks a chat model which service is down, lets it call
tools (two status checks at once, then a ticket), and finally streams a
short report. It uses the real ``openai.AsyncOpenAI`` client; to stay
offline, the recipe starts a scripted OpenAI-compatible server on 127.0.0.1
(``_scripted_api.py``), so every model call is a real HTTP request.

Making it durable:

- ``wrap(client)``: inside a run, ``client.chat.completions.create`` (plain
  and ``stream=True``) is a recorded model call, rebuilt as the SDK's own
  ``ChatCompletion`` / ``ChatCompletionChunk`` on replay;
- ``@durable.tool`` on the tools, ``durable.branch(tool_call.id)`` around
  each tool call of a turn, ``@durable.workflow`` on the loop.

``model="ops"`` names a slot: the run's ``models={"ops": ...}`` says which
model it is.

Run it (needs ``pip install "little-workflow[openai]"``):

    python cookbook/openai_client.py

It starts the agent in a child process, kills it with SIGKILL while the
streamed report's request is in flight, resumes the run in this process and
prints how often each HTTP request and tool call really happened.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import _crashdemo as demo
from _scripted_api import Reply, Request, ScriptedAPI, ToolCall

import durable

try:
    from openai import AsyncOpenAI

    from durable.integrations.openai import wrap
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs the openai package: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "on-call"
REPORT = "Report: search has been returning 503 since 09:12. Billing is healthy. Ticket T-1 is open."
TOOL_SPECS: Any = [
    {"type": "function", "function": {"name": "check_status", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "open_ticket", "parameters": {"type": "object"}}},
]


def scripted_model(request: Request) -> Reply:
    """The stand-in for the API: answers each turn of the conversation from a script."""
    demo.reached(f"http-request-turn-{request.turn}")
    if request.turn == 0:
        checks = [ToolCall(f"call_{s}", "check_status", {"service": s}) for s in ("billing", "search")]
        return Reply(tool_calls=checks)
    if request.turn == 1:
        ticket = {"service": "search", "summary": "search returns 503"}
        return Reply(tool_calls=[ToolCall("call_ticket", "open_ticket", ticket)])
    return Reply(text="search is down; ticket opened." if request.turn == 2 else REPORT)


# -- the agent, as it was written (plus wrap, the decorators and the branch) ---------

client: AsyncOpenAI  # set by attempt(): wrap(AsyncOpenAI(...)) pointed at the local server


@durable.tool(idempotent=True)
async def check_status(service: str) -> str:
    await demo.ran(f"check_status-{service}")
    return f"{service}: {'503 errors' if service == 'search' else 'healthy'}"


@durable.tool(idempotent=True)
async def open_ticket(service: str, summary: str) -> str:
    await demo.ran("open_ticket")
    # A real ticket system would be given durable.idempotency_key() to drop duplicates.
    return f"T-1 ({service}: {summary}; key {durable.idempotency_key()})"


TOOLS = {"check_status": check_status, "open_ticket": open_ticket}


async def run_tool(call: Any) -> dict[str, Any]:
    async with durable.branch(call.id):  # keyed by the model's tool_call_id
        result = await TOOLS[call.function.name](**json.loads(call.function.arguments))
    return {"role": "tool", "tool_call_id": call.id, "content": result}


@durable.workflow
async def on_call(alert: str) -> str:
    messages: list[Any] = [{"role": "user", "content": alert}]
    while True:
        reply = await client.chat.completions.create(model="ops", messages=messages, tools=TOOL_SPECS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        messages += await asyncio.gather(*(run_tool(c) for c in message.tool_calls))
    messages.append({"role": "user", "content": "Write the report."})
    stream = await client.chat.completions.create(model="ops", messages=messages, stream=True)
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]).strip()


async def attempt(data_dir: Path) -> str:
    global client
    with ScriptedAPI(scripted_model) as api, durable.local_world(data_dir) as world:
        client = wrap(AsyncOpenAI(base_url=f"{api.url}/v1", api_key="offline", max_retries=0))
        try:
            return await durable.run_workflow(  # type: ignore[no-any-return]
                on_call, "Pager: errors are up.", world=world, run_id=RUN_ID, models={"ops": "gpt-5-mini"}
            )
        finally:
            await client.close()


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="http-request-turn-3")


if __name__ == "__main__":
    sys.exit(main())
