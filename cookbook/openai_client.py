"""Make code that uses the official ``openai`` client durable.

An on-call agent asks a chat model which service is down, lets it call
tools (two status checks at once, then a ticket), and finally streams a
short report. It uses the real ``openai.AsyncOpenAI`` client; to stay
offline, the recipe starts a small OpenAI-compatible server on 127.0.0.1
that answers from a script, so every model call is a real HTTP request.

Making it durable took decorators and one ``async with``:

- ``@durable.model_call`` on the functions that call
  ``client.chat.completions.create`` (one plain, one streamed: a
  ``@model_call`` on an async generator records the chunks),
- ``@durable.tool`` on the tools,
- ``@durable.workflow`` on the loop, whose body opens ``durable.session``,
- ``durable.branch(tool_call.id)`` around each tool call of a turn.

Run it (needs ``pip install "little-workflow[agents]"``):

    python cookbook/openai_client.py

It starts the agent in a child process, kills it with SIGKILL while the
streamed report is in flight, resumes the run in this process and prints
how often each model call, HTTP request and tool call really happened.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import _crashdemo as demo

import durable

try:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs the openai package: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "on-call"
MODEL = "scripted-ops-1"
client: AsyncOpenAI  # set by serve(): the real client, pointed at the local server

# -- a small OpenAI-compatible server (stands in for the API; offline) --------

SCRIPT: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {"id": "call_billing", "name": "check_status", "arguments": {"service": "billing"}},
            {"id": "call_search", "name": "check_status", "arguments": {"service": "search"}},
        ]
    },
    {
        "tool_calls": [
            {
                "id": "call_ticket",
                "name": "open_ticket",
                "arguments": {"service": "search", "summary": "search returns 503"},
            }
        ]
    },
    {"content": "search is down; ticket opened."},
    {"content": "Report: search has been returning 503 since 09:12. Billing is healthy. Ticket T-1 is open."},
]


class ScriptedChat(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        """Answer one chat completion request from the script (streamed when asked)."""
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        demo.note(f"http-request-turn-{turn}")
        step = SCRIPT[turn]
        if body.get("stream"):
            self._stream(step["content"])
            return
        message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
        if "tool_calls" in step:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                }
                for c in step["tool_calls"]
            ]
        reply = {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in step else "stop",
                }
            ],
        }
        self._send(200, "application/json", json.dumps(reply).encode())

    def _stream(self, text: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i, word in enumerate(text.split(" ")):
            delta = {"content": word + " "} if i else {"role": "assistant", "content": word + " "}
            chunk = {
                "id": "chatcmpl-stream",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _send(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the demo's output quiet."""


def serve() -> ThreadingHTTPServer:
    """Start the scripted server on a free 127.0.0.1 port and point the client at it."""
    global client
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="offline")
    return server


# -- the agent, as it was written (plus the decorators) -----------------------

TOOL_SPECS = [
    {
        "type": "function",
        "function": {
            "name": "check_status",
            "parameters": {"type": "object", "properties": {"service": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "open_ticket",
            "parameters": {
                "type": "object",
                "properties": {"service": {"type": "string"}, "summary": {"type": "string"}},
            },
        },
    },
]


@durable.model_call(slot="ops")
async def complete(messages: list[dict[str, Any]]) -> ChatCompletion:
    turn = sum(1 for m in messages if m["role"] == "assistant")
    await demo.ran(f"model-turn-{turn}")
    return await client.chat.completions.create(model=MODEL, messages=messages, tools=TOOL_SPECS)  # type: ignore[arg-type]


@durable.model_call(slot="ops")
async def stream_report(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
    await demo.ran("model-report-stream")
    stream = await client.chat.completions.create(model=MODEL, messages=messages, stream=True)  # type: ignore[arg-type]
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


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
    messages: list[dict[str, Any]] = [{"role": "user", "content": alert}]
    async with durable.session("ops", tools=list(TOOLS.values())):
        while True:
            message = (await complete(messages)).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            messages += await asyncio.gather(*(run_tool(c) for c in message.tool_calls))
        messages.append({"role": "user", "content": "Write the report."})
        return "".join([chunk async for chunk in stream_report(messages)]).strip()


# -- running it ----------------------------------------------------------------


async def attempt(data_dir: Path) -> str:
    server = serve()
    try:
        with durable.local_world(data_dir) as world:
            return await durable.run_workflow(  # type: ignore[no-any-return]
                on_call, "Pager: errors are up.", world=world, run_id=RUN_ID, models={"ops": MODEL}
            )
    finally:
        await client.close()
        server.shutdown()
        server.server_close()


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="model-report-stream")


if __name__ == "__main__":
    sys.exit(main())
