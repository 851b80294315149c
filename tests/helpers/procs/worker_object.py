"""A ``Worker`` object configured in its module, served by ``little worker MODULE:worker``.

Every option of the object differs from its default, so a command that
served another worker than this one would show it.
"""

from __future__ import annotations

import durable

jobs = durable.Queue("jobs", concurrency=3)


@durable.workflow
async def job(x: int) -> int:
    return x + 1


@durable.workflow
async def tick() -> None:
    return None


nightly = durable.Schedule("nightly", tick, cron="0 3 * * *")

worker = durable.Worker(
    durable.memory_world(),  # the command serves the world it is given, as every command does
    workflows=[job],
    queues=[jobs],
    concurrency=7,
    schedules=[nightly],
    name="configured-worker",
    max_recovery_attempts=50,
)
