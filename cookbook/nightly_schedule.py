"""A nightly schedule: a report at 03:00 Berlin time, backfilled, paused and listed.

``Schedule("nightly-report", report, cron="0 3 * * *", timezone="Europe/Berlin")``
given to a ``Worker`` starts one run per night with the id
``schedule:nightly-report:<tick in UTC>``, so several workers never start a
night twice. Nights that passed while no worker ran follow ``catch_up=``
(the latest one only, by default). ``world.schedules`` changes schedules at
run time: here it backfills the three nights before the recipe ran, and
pauses the schedule; ``little schedules`` shows each one with its next tick.

Run it:

    python cookbook/nightly_schedule.py
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import durable
from durable.cli import main as little


@durable.step
async def sum_sales(kind: str) -> int:
    return 4_200 if kind == "sales" else 0  # a real step would query the database


@durable.tool(idempotent=True)
async def publish(text: str) -> str:
    return f"published: {text}"  # a real tool would post it with durable.idempotency_key()


@durable.workflow
async def report(kind: str) -> str:
    total = await sum_sales(kind)
    return await publish(f"{kind} report at {durable.now():%Y-%m-%d %H:%M} UTC: {total}")


nightly = durable.Schedule(
    "nightly-report", report, cron="0 3 * * *", timezone="Europe/Berlin", input="sales", catch_up="latest"
)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / ".little-workflow"
        world = durable.local_world(data)
        async with durable.Worker(world, workflows=[report], schedules=[nightly]):
            today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            handles = world.schedules.backfill("nightly-report", today - timedelta(days=3), today)
            for h in handles:
                print(h.run_id, "->", await h.result(timeout=30))
            again = world.schedules.backfill("nightly-report", today - timedelta(days=3), today)
            assert [h.run_id for h in again] == [h.run_id for h in handles]  # a night runs once
        little(["schedules", "--data-dir", str(data)])
        world.schedules.pause("nightly-report")
        little(["schedules", "--data-dir", str(data)])
        world.close()


if __name__ == "__main__":
    asyncio.run(main())
