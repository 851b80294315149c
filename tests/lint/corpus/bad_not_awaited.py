"""Bad: durable calls whose coroutine is never awaited."""

import durable
from durable import step, workflow


@step
async def notify(who: str) -> None:
    return None


@workflow
async def onboard(who: str) -> str:
    notify(who)  # expect: not-awaited
    durable.sleep(60)  # expect: not-awaited
    return who
