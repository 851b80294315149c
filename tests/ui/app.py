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
