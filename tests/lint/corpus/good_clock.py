"""Good: the time comes from durable.now(), waits from durable.sleep(), the real clock only in a tool."""

import time

import durable


@durable.tool
async def wall_clock() -> float:
    return time.time()


@durable.workflow
async def report(x: int) -> str:
    started = durable.now()
    await durable.sleep(5)
    return f"{x} {started} {await wall_clock()}"
