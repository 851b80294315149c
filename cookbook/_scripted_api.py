"""A scripted model API on 127.0.0.1 that speaks the openai and anthropic wire formats.

Not a recipe itself: the client recipes and the integration tests start it so
that every model call is a real HTTP request without leaving the machine.

- ``POST /v1/chat/completions``: openai chat completions,
- ``POST /v1/responses``: the openai Responses API,
- ``POST /v1/messages``: anthropic messages,

each answered as JSON, or as server-sent events when the request says
``"stream": true``. A *script* decides each reply from the request: it returns
``Reply(text=...)`` or ``Reply(tool_calls=[ToolCall(...), ...])``. Every request
is logged (``server.requests``; also one line per request in ``log_path``,
fsynced, so counts survive a killed client). ``hold`` makes the server stop
answering one request until ``release()``: a test kills the client while that
request is in flight.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Request:
    route: str  # "chat", "responses" or "messages"
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def turn(self) -> int:
        """How many assistant turns the conversation already holds."""
        if self.route == "responses":
            items = self.body.get("input")
            if not isinstance(items, list):
                return 0
            return sum(1 for i in items if i.get("type") == "function_call" or i.get("role") == "assistant")
        return sum(1 for m in self.body.get("messages", []) if m.get("role") == "assistant")


Script = Callable[[Request], Reply]
ROUTES = {"/v1/chat/completions": "chat", "/chat/completions": "chat", "/v1/responses": "responses",
          "/responses": "responses", "/v1/messages": "messages"}  # fmt: skip


def _sse(events: Iterator[tuple[str | None, dict[str, Any]]], done: bool) -> Iterator[bytes]:
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        yield f"{head}data: {json.dumps(data)}\n\n".encode()
    if done:
        yield b"data: [DONE]\n\n"


# -- openai chat completions ---------------------------------------------------------


def chat_reply(reply: Reply, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in reply.tool_calls
        ]
    finish = "tool_calls" if reply.tool_calls else "stop"
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}  # fmt: skip


def chat_chunks(reply: Reply, model: str, n: int) -> Iterator[tuple[str | None, dict[str, Any]]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return None, {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0, "model": model,
                      "choices": [choice]}  # fmt: skip

    yield chunk({"role": "assistant", "content": ""})
    for word in (reply.text or "").split(" ") if reply.text else []:
        yield chunk({"content": word + " "})
    for i, c in enumerate(reply.tool_calls):
        call = {"index": i, "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}  # fmt: skip
        yield chunk({"tool_calls": [call]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")


# -- openai responses ------------------------------------------------------------------


def response_reply(reply: Reply, model: str, n: int, status: str = "completed") -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text is not None and status == "completed":
        content = [{"type": "output_text", "text": reply.text, "annotations": []}]
        output.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                       "content": content})  # fmt: skip
    for c in reply.tool_calls if status == "completed" else []:
        output.append({"type": "function_call", "id": f"fc_{c.id}", "call_id": c.id, "name": c.name,
                       "arguments": json.dumps(c.arguments), "status": "completed"})  # fmt: skip
    return {"id": f"resp_{n}", "object": "response", "created_at": 0, "model": model, "status": status,
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
            "temperature": None, "top_p": None}  # fmt: skip


def response_events(reply: Reply, model: str, n: int) -> Iterator[tuple[str | None, dict[str, Any]]]:
    seq = iter(range(10_000))

    def event(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(seq), **data}

    yield event("response.created", response=response_reply(reply, model, n, "in_progress"))
    final = response_reply(reply, model, n)
    for i, item in enumerate(final["output"]):
        started = {**item, "status": "in_progress", "content": []} if item["type"] == "message" else item
        yield event("response.output_item.added", output_index=i, item=started)
        if item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added", item_id=item["id"], output_index=i, content_index=0, part=part
            )
            for word in (reply.text or "").split(" "):
                yield event("response.output_text.delta", item_id=item["id"], output_index=i, content_index=0,
                            delta=word + " ", logprobs=[])  # fmt: skip
            text = item["content"][0]["text"]
            yield event("response.output_text.done", item_id=item["id"], output_index=i, content_index=0,
                        text=text, logprobs=[])  # fmt: skip
            yield event("response.content_part.done", item_id=item["id"], output_index=i, content_index=0,
                        part=item["content"][0])  # fmt: skip
        yield event("response.output_item.done", output_index=i, item=item)
    yield event("response.completed", response=final)


# -- anthropic messages ------------------------------------------------------------------


def message_reply(reply: Reply, model: str, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in reply.tool_calls
    ]
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip


def message_events(reply: Reply, model: str, n: int) -> Iterator[tuple[str | None, dict[str, Any]]]:
    start = {**message_reply(reply, model, n), "content": [], "stop_reason": None}
    yield "message_start", {"type": "message_start", "message": start}
    index = 0
    if reply.text:
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}  # fmt: skip
        for word in reply.text.split(" "):
            yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": word + " "}}  # fmt: skip
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for i, c in enumerate(reply.tool_calls, start=index):
        block = {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": block}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(c.arguments)}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    stop = "tool_use" if reply.tool_calls else "end_turn"
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 1}}  # fmt: skip
    yield "message_stop", {"type": "message_stop"}


_RENDER = {
    "chat": (chat_reply, chat_chunks, True),
    "responses": (response_reply, response_events, False),
    "messages": (message_reply, message_events, False),
}


class ScriptedAPI:
    """The server: ``with ScriptedAPI(script) as api: ... api.url ...``."""

    def __init__(self, script: Script, log_path: Path | None = None) -> None:
        self.script = script
        self.log_path = log_path
        self.requests: list[Request] = []
        self.hold: Callable[[Request], bool] | None = None
        self.held = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>``); openai clients add ``/v1``."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> ScriptedAPI:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def release(self) -> None:
        self._release.set()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, request: Request) -> int:
        with self._lock:
            self.requests.append(request)
            n = len(self.requests)
            if self.log_path is not None:
                stream = "-stream" if request.body.get("stream") else ""
                with open(self.log_path, "a") as f:
                    f.write(f"{request.route}-turn-{request.turn}{stream}\n")
                    f.flush()
                    os.fsync(f.fileno())
        return n

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                route = ROUTES.get(self.path.split("?")[0])
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if route is None:
                    self._send(404, b'{"error": {"message": "no such route"}}', "application/json")
                    return
                request = Request(route, body, {k.lower(): v for k, v in self.headers.items()})
                n = api._record(request)
                if api.hold is not None and api.hold(request):
                    api.held.set()
                    api._release.wait()
                    return  # the client was killed meanwhile; nothing to answer
                reply = api.script(request)
                whole, events, done = _RENDER[route]
                model = str(body.get("model", "scripted"))
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for piece in _sse(events(reply, model, n), done):
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                self._send(200, json.dumps(whole(reply, model, n)).encode(), "application/json")

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler
