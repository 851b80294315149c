"""Bad: durable.interrupt() awaited, however it is imported."""

import durable
import durable as dl
from durable import interrupt


@durable.workflow
async def approve(draft: str) -> str:
    first = await durable.interrupt({"approve": draft})  # expect: awaited-interrupt
    second = await interrupt({"again": draft})  # expect: awaited-interrupt
    third = await dl.interrupt({"last": draft})  # expect: awaited-interrupt
    return f"{first} {second} {third}"
