"""Workflows the inspector's tests run: one waits for an answer, one ticks until it ends or is cancelled."""

from __future__ import annotations

import durable


@durable.step
async def draft(topic: str) -> str:
    return f"a draft about {topic}"


@durable.tool
async def publish(text: str) -> str:
    return f"published: {text}"


@durable.workflow
async def approval(topic: str) -> str:
    text = await draft(topic)
    answer = durable.interrupt({"question": "publish?", "draft": text})
    if answer != "yes":
        return "not published"
    return await publish(text)


@durable.workflow
async def ticking(n: int) -> int:
    for _ in range(n):
        await durable.sleep(0.2)
    return n


@durable.step
async def explode(x: int) -> int:
    raise ValueError(f"cannot handle {x} <script>alert(1)</script>")


@durable.workflow
async def failing(x: int) -> int:
    return await explode(x)


@durable.workflow
async def parent(topic: str) -> str:
    return await child(topic)


@durable.workflow
async def child(topic: str) -> str:
    return await draft(topic)


@durable.model_call(slot="researcher")
async def read_source(source: str) -> str:
    return f"[{durable.model_for('researcher')}] notes from {source}"


@durable.tool(idempotent=True)
async def lookup_customer_record(customer_id: str) -> dict[str, str]:
    return {"id": customer_id, "plan": "enterprise", "history": "renewed twice; " * 60}


@durable.model_call(slot="writer")
async def write_reply(notes: list[str]) -> str:
    model = durable.model_for("writer")
    return f"[{model}] Dear customer, thank you for writing. From {len(notes)} notes: we fixed it."


@durable.tool
async def file_record(record: dict[str, str]) -> str:
    """A tool whose input is long: the tree cuts it and links to the whole of it."""
    return f"filed {record['id']}"


@durable.step
async def research(customer_id: str) -> list[str]:
    await file_record(await lookup_customer_record(customer_id))
    return list(await durable.parallel("sources", ["faq", "tickets"], read_source, key=lambda s: s))


@durable.step(max_visits=2)
async def polish(text: str) -> str:
    return text + " (polished)"


@durable.workflow
async def support(customer_id: str) -> str:
    notes = await research(customer_id)
    async with durable.session("writer"):
        reply = await write_reply(notes)
    return await polish(await polish(reply))


CUT = {"armed": False}
"""While armed, ``charge_card`` dies mid-call: its intent is durable, its receipt never written."""


@durable.tool
async def charge_card(cents: int) -> str:
    if CUT["armed"]:
        raise KeyboardInterrupt  # stands for the driver dying inside the call
    return f"charged {cents}"


@durable.workflow
async def charging(cents: int) -> str:
    return f"paid: {await charge_card(cents)}"


@durable.model_call
async def estimate(turn: int) -> dict[str, object]:
    """A model call that reports its usage as the integrations record it."""
    return {"model": "small", "usage": {"input_tokens": 40, "output_tokens": 10}, "turn": turn}


@durable.workflow
async def capped(turns: int) -> int:
    """An agent loop of ``turns`` model calls, started with a budget."""
    for i in range(turns):
        await estimate(i)
    return turns


@durable.tool(idempotent=True)
async def refund_bill(order: str, result: str) -> str:
    """Undoes a charge."""
    return f"refunded {result}"


@durable.tool(compensate=refund_bill)
async def bill_card(order: str) -> str:
    return f"ch-{order}"


@durable.tool(retry=durable.RetryPolicy(max_attempts=2, backoff=0))
async def free_seat(order: str, result: str) -> None:
    """Undoes a reservation; the venue's system refuses every time."""
    raise RuntimeError(f"venue offline for {result} <b>now</b>")


@durable.tool(compensate=free_seat)
async def reserve_seat(order: str) -> str:
    return f"seat-{order}"


@durable.tool
async def send_tickets(order: str) -> str:
    raise durable.NonRetryableError("no courier")


@durable.workflow
async def ticket_saga(order: str) -> str:
    """Reserve, charge, then a failure: the refund is confirmed, the seat's undo fails, the run is blocked."""
    await reserve_seat(order)
    await bill_card(order)
    return await send_tickets(order)
