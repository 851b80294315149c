"""Good: time from durable.now(), waits from durable.sleep(), the real clock in a tool or a plain step.

A step that makes no durable call may read the clock: its output is recorded.
"""

import time

import durable


@durable.tool
async def wall_clock() -> float:
    return time.time()


@durable.step
async def stamp(x: int) -> str:
    return f"{x} stamped at {time.time()}"


@durable.workflow
async def report(x: int) -> str:
    started = durable.now()
    await durable.sleep(5)
    return f"{x} {started} {await wall_clock()} {await stamp(x)}"
