"""A chat agent that waits for the user's next message, and a page that streams its tokens.

The workflow loops: ``durable.recv()`` waits for the user's next message (a
durable wait: the run may be recovered by another process meanwhile), a
streamed model call answers with ``stream_to="tokens"`` so each token is
written to the run's stream as it arrives, and ``set_event`` keeps the turn
count. A small page served on 127.0.0.1 (plain asyncio, no framework) posts
what the user types with ``handle.send`` and shows the tokens live through
``handle.read_stream`` as Server-Sent Events; a browser that reconnects
passes the offset it reached (``?start=``), so no token is shown twice.

Run it (a scripted user talks to the page and the recipe exits):

    python cookbook/chat_agent.py

or serve the page until Ctrl-C and chat in a browser:

    python cookbook/chat_agent.py --serve
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import durable

END_OF_TURN = "\n"


@durable.model_call(slot="chat", stream_to="tokens")
async def answer(history: list[str]) -> AsyncIterator[str]:
    # A real model call streams from the provider; this one is scripted to run offline.
    text = f"You said {history[-1]!r}; that makes {len(history)} message(s) so far."
    for word in text.split(" "):
        await asyncio.sleep(0.005)  # the network
        yield word + " "


@durable.workflow
async def chat(greeting: str) -> list[str]:
    history: list[str] = []
    await durable.write_stream("tokens", greeting + END_OF_TURN)
    while True:
        said = await durable.recv(timeout=600)  # None after ten quiet minutes
        if said is None or said == "bye":
            await durable.write_stream("tokens", "bye!" + END_OF_TURN)
            durable.close_stream("tokens")
            return history
        history.append(said)
        _ = [token async for token in answer(history)]  # each token reached the stream already
        await durable.write_stream("tokens", END_OF_TURN)
        durable.set_event("turns", len(history))


PAGE = """<!doctype html><meta charset="utf-8"><title>durable chat</title>
<pre id="log"></pre><form id="f"><input id="t" autofocus><button>send</button></form>
<script>
let seen = 0;
function listen() {
  const es = new EventSource("/stream?start=" + seen);
  es.onmessage = (e) => { seen += 1; document.getElementById("log").textContent += JSON.parse(e.data); };
  es.addEventListener("end", () => es.close());
  es.onerror = () => { es.close(); setTimeout(listen, 500); };   // reconnect from the offset reached
}
listen();
document.getElementById("f").onsubmit = async (e) => {
  e.preventDefault();
  const t = document.getElementById("t");
  await fetch("/say", {method: "POST", body: t.value});
  t.value = "";
};
</script>"""


def page_server(handle: durable.RunHandle, tasks: set[asyncio.Task[Any]]) -> Any:
    """The page's HTTP handler: ``/`` the page, ``POST /say`` a message, ``/stream`` the tokens."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)  # a stream that nobody reads any more is cancelled at shutdown
        try:
            request = (await reader.readline()).decode()
            method, target, _ = request.split(" ", 2)
            headers = {}
            while (line := (await reader.readline()).decode().strip()) != "":
                name, _, value = line.partition(":")
                headers[name.lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            url = urlsplit(target)
            if method == "POST" and url.path == "/say":
                await handle.send(body.decode())
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            elif url.path == "/stream":
                start = int(parse_qs(url.query).get("start", ["0"])[0])
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
                )
                async for token in handle.read_stream("tokens", start=start):
                    writer.write(f"data: {json.dumps(token)}\n\n".encode())
                    await writer.drain()
                writer.write(b"event: end\ndata: {}\n\n")
            else:
                html = PAGE.encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n")
                writer.write(f"Content-Length: {len(html)}\r\n\r\n".encode() + html)
            await writer.drain()
        except (ConnectionError, ValueError):
            pass
        finally:
            tasks.discard(task)
            writer.close()

    return serve


async def http(
    port: int, method: str, path: str, body: str = ""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = body.encode()
    writer.write(
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
    )
    await writer.drain()
    return reader, writer


async def read_turn(reader: asyncio.StreamReader) -> tuple[str, int]:
    """Read Server-Sent Events until the end of a turn; the text and the number of tokens read."""
    text, n = "", 0
    while True:
        line = (await reader.readline()).decode()
        if line.startswith("data: "):
            token = json.loads(line[6:])
            text, n = text + token, n + 1
            if token.endswith(END_OF_TURN):
                return text.strip(), n


async def scripted_user(port: int, handle: durable.RunHandle) -> None:
    reader, writer = await http(port, "GET", "/stream?start=0")
    while (await reader.readline()) != b"\r\n":  # the response's headers
        pass
    seen = 0
    greeting, n = await read_turn(reader)
    seen += n
    print("agent:", greeting)
    for message in ["hello", "what is durable?"]:
        print("user: ", message)
        await (await http(port, "POST", "/say", message))[0].read()
        reply, n = await read_turn(reader)
        seen += n
        print("agent:", reply)
    writer.close()  # the page goes away, as a browser tab would
    print("turns so far:", await handle.get_event("turns"))
    reader, writer = await http(port, "GET", f"/stream?start={seen}")  # it reconnects at its offset
    while (await reader.readline()) != b"\r\n":
        pass
    await (await http(port, "POST", "/say", "bye"))[0].read()
    bye, _ = await read_turn(reader)
    print("agent:", bye)
    writer.close()


async def main(serve_forever: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = durable.local_world(Path(tmp) / ".little-workflow")
        handle = durable.start_workflow(chat, "Hi! Say something (or 'bye').", world=world, run_id="chat_1")
        tasks: set[asyncio.Task[Any]] = set()
        server = await asyncio.start_server(page_server(handle, tasks), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            if serve_forever:
                print(f"chat at http://127.0.0.1:{port}/ (Ctrl-C to stop)")
                await handle.result()
            else:
                await scripted_user(port, handle)
                history = await handle.result(timeout=30)
                assert history == ["hello", "what is durable?"], history
                print("the run completed with", history)
            for t in list(tasks):
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        world.close()


if __name__ == "__main__":
    asyncio.run(main("--serve" in sys.argv))
