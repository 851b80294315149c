"""Good: every durable call is awaited (a sync step is just called)."""

import durable
from durable import step, workflow


@step
async def notify(who: str) -> None:
    return None


@step
def count(who: str) -> int:
    return len(who)


@workflow
async def onboard(who: str) -> str:
    await notify(who)
    await durable.sleep(60)
    count(who)
    return who
