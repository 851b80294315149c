"""An order workflow that emails the customer through the outbox.

``send_confirmation`` is a ``@tool(outbox=True)``: inside the run, calling it
records the call and an outbox entry in one transaction and returns an
``OutboxRef`` at once, so the order finishes without waiting for the mail
provider. A worker's dispatcher then calls the tool body with the entry's
idempotency key, retries it under its ``retry=`` policy when the provider
fails, and records the result. The provider here is a small HTTP server on
127.0.0.1 that fails its first request and deduplicates by the
``Idempotency-Key`` header, as real email APIs do: the customer gets one
email, whatever the retries.

Run it:

    python cookbook/order_outbox.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import durable
from durable.cli import main as little

PROVIDER = {"port": 0, "requests": 0, "sent": {}}  # the fake mail provider's state


async def provider(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A mail API: POST /send with an Idempotency-Key; the first request of the day fails (503)."""
    await reader.readline()
    headers = {}
    while (line := (await reader.readline()).decode().strip()) != "":
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    body = json.loads(await reader.readexactly(int(headers["content-length"])))
    PROVIDER["requests"] += 1  # type: ignore[operator]
    if PROVIDER["requests"] == 1:
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
    else:
        PROVIDER["sent"].setdefault(headers["idempotency-key"], body)  # type: ignore[union-attr]
        writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


@durable.tool(outbox=True, retry=durable.RetryPolicy(max_attempts=4, backoff=0.05))
async def send_confirmation(email: str, order_id: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", PROVIDER["port"])  # type: ignore[arg-type]
    body = json.dumps({"to": email, "subject": f"order {order_id} confirmed"}).encode()
    writer.write(
        f"POST /send HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: {durable.idempotency_key()}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    writer.close()
    if status >= 500:
        raise ConnectionError(f"the mail provider answered {status}")
    return f"accepted ({status})"


@durable.step
async def charge(order_id: str, cents: int) -> str:
    return f"charge_{order_id}_{cents}"


@durable.workflow
async def place_order(order: dict[str, str]) -> dict[str, str]:
    charge_id = await charge(order["id"], 4200)
    ref = await send_confirmation(order["email"], order["id"])  # returns at once
    return {"charge": charge_id, "email": ref.key}  # type: ignore[attr-defined]


async def main() -> None:
    server = await asyncio.start_server(provider, "127.0.0.1", 0)
    PROVIDER["port"] = server.sockets[0].getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / ".little-workflow"
        world = durable.local_world(data)
        out = await durable.run_workflow(
            place_order, {"id": "A-17", "email": "ada@example.com"}, world=world, run_id="order_A-17"
        )
        print("order placed:", out)
        print("emails sent before any worker ran:", len(PROVIDER["sent"]))  # type: ignore[arg-type]
        little(["outbox", "--data-dir", str(data)])
        async with durable.Worker(world, workflows=[place_order]):  # its dispatcher sends the email
            store = world.open_outbox()
            for _ in range(3000):
                entry = store.get(out["email"])
                if entry is not None and entry.state == "delivered":
                    break
                await asyncio.sleep(0.01)
            assert entry is not None
        print(f"delivered after {entry.attempts} attempts: {entry.result}")
        assert PROVIDER["sent"] == {
            out["email"]: {"to": "ada@example.com", "subject": "order A-17 confirmed"}
        }
        little(["outbox", "--all", "--data-dir", str(data)])
        world.close()
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
