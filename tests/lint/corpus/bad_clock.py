"""Bad: workflow and step bodies read the clock (and a helper they call does too)."""

import asyncio
import datetime
import time
from datetime import datetime as dt

import durable


def stamp() -> float:
    return time.time()  # expect: clock


@durable.step
async def wait_a_bit() -> None:
    await asyncio.sleep(5)  # expect: clock
    await durable.sleep(1)  # a durable call in the step: its body runs again on a resume


@durable.workflow
async def report(x: int) -> str:
    started = datetime.datetime.now()  # expect: clock
    today = dt.today()  # expect: clock
    await wait_a_bit()
    return f"{x} {started} {today} {stamp()} {time.monotonic()}"  # expect: clock
