"""A web request starts a run and answers with its id; a worker in another process finishes it.

The request handler never waits for the work: ``start_workflow(queue=...)``
records the run durably and returns its handle at once, the handler answers
``202`` with the run id, and a worker process that serves the queue claims the
run and drives it. Any process can then ask for the run's status and result
by its id, even after the process that started it has gone.

The HTTP server is plain asyncio on 127.0.0.1 (no web framework needed for
the point made here; a Starlette or FastAPI handler calls the same two lines).

Run it:

    python cookbook/request_handler.py

It starts the worker as a child process (``python request_handler.py worker
DATA_DIR``, which is what ``little worker request_handler:worker`` does),
serves two requests, polls the runs through ``GET /runs/<id>`` until they
complete, and stops the worker with SIGTERM, which it survives gracefully.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import durable

summaries = durable.Queue("summaries", concurrency=4)


class Document(BaseModel):
    title: str
    text: str


class Summary(BaseModel):
    title: str
    words: int
    first_sentence: str


@durable.step
async def count_words(text: str) -> int:
    return len(text.split())


@durable.step
async def first_sentence(text: str) -> str:
    await asyncio.sleep(0.05)  # durable: ignore[clock]  (stands in for a model call)
    return text.split(".")[0].strip() + "."


@durable.workflow
async def summarize(doc: Document) -> Summary:
    return Summary(
        title=doc.title, words=await count_words(doc.text), first_sentence=await first_sentence(doc.text)
    )


# -- the web application ----------------------------------------------------------


async def handle_request(world: durable.World, method: str, path: str, body: bytes) -> tuple[int, Any]:
    """The two routes: ``POST /summaries`` starts a run, ``GET /runs/<id>`` reports on one."""
    if method == "POST" and path == "/summaries":
        doc = Document.model_validate_json(body)
        run = durable.start_workflow(summarize, doc, world=world, queue=summaries)
        return 202, {"run_id": run.run_id}
    if method == "GET" and path.startswith("/runs/"):
        try:
            run = durable.handle(path.removeprefix("/runs/"), world=world)
        except durable.RunNotFoundError as exc:
            return 404, {"error": str(exc)}
        status = await run.status()
        out: dict[str, Any] = {"status": status}
        if status == "completed":
            out["result"] = (await run.result()).model_dump()
        return 200, out
    return 404, {"error": f"no route {method} {path}"}


async def serve(world: durable.World) -> asyncio.Server:
    """An HTTP/1.1 server on 127.0.0.1 (one request per connection)."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method, path, _ = head.split("\r\n")[0].split(" ")
        fields = dict(line.lower().split(": ", 1) for line in head.strip().split("\r\n")[1:])
        length = int(fields.get("content-length", 0))
        body = await reader.readexactly(length)
        code, payload = await handle_request(world, method, path, body)
        data = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
            f"connection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    return await asyncio.start_server(on_connection, "127.0.0.1", 0)


async def request(port: int, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
    """A tiny HTTP client for the demo."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = b"" if payload is None else json.dumps(payload).encode()
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


# -- the worker process -------------------------------------------------------------


async def run_worker(data_dir: str) -> None:
    """What ``little worker`` runs: serve the queue until SIGTERM, then stop gracefully."""
    with durable.local_world(data_dir) as world:
        await durable.Worker(world, workflows=[summarize], queues=[summaries]).run()


async def main() -> None:
    data_dir = tempfile.mkdtemp(prefix="durable-requests-")
    worker = await asyncio.create_subprocess_exec(sys.executable, __file__, "worker", data_dir)
    try:
        with durable.local_world(data_dir) as world:
            server = await serve(world)
            port = server.sockets[0].getsockname()[1]
            docs = [
                {"title": "Durable runs", "text": "A run survives a crash. Its steps are not repeated."},
                {"title": "Queues", "text": "A queue bounds work in flight. Workers claim runs from it."},
            ]
            ids = []
            for doc in docs:
                code, answer = await request(port, "POST", "/summaries", doc)
                assert code == 202, answer
                print(f"POST /summaries -> {code} {answer}")
                ids.append(answer["run_id"])
            for run_id in ids:
                while True:
                    code, answer = await request(port, "GET", f"/runs/{run_id}")
                    if answer["status"] == "completed":
                        break
                    await asyncio.sleep(0.02)
                print(f"GET /runs/{run_id} -> {answer['result']}")
                assert answer["result"]["words"] > 0
            server.close()
            await server.wait_closed()
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(worker.wait(), 30)
    assert code == 0, f"the worker exited with {code}"
    print(f"worker stopped gracefully; data directory: {Path(data_dir)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(run_worker(sys.argv[2]))
    else:
        asyncio.run(main())
