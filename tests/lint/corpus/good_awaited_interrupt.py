"""Good: durable.interrupt() returns the answer; only durable's coroutines are awaited."""

import durable


@durable.workflow
async def approve(draft: str) -> str:
    verdict = durable.interrupt({"approve": draft})
    await durable.sleep(1)
    return str(verdict)
