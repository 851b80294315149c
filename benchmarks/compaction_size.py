"""Log size before and after compacting a 10,000-step run.

Run from the repository root: ``python benchmarks/compaction_size.py [STEPS]``.
It runs one workflow of STEPS sequential steps (default 10,000) in a fresh
SQLite data directory, then compacts the run and vacuums the file, and
prints the event count, the stored payload bytes and the file size before
and after.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import durable

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000


@durable.step(max_visits=STEPS)
async def work(i: int) -> dict[str, int | str]:
    return {"i": i, "square": i * i, "note": f"item {i}"}


@durable.workflow
async def many_steps() -> int:
    for i in range(STEPS):
        await work(i)
    return STEPS


def measure(world: durable.World, db: Path) -> tuple[int, int, int]:
    world.vacuum()
    rows = world.log.read("big")
    return len(rows), sum(len(d) for _, _, d in rows), db.stat().st_size


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, durable.local_world(tmp) as world:
        db = Path(tmp) / "events.db"
        asyncio.run(durable.run_workflow(many_steps, world=world, run_id="big"))
        before = measure(world, db)
        state = durable.recover("big", world=world).to_state()
        durable.compact("big", world=world)
        after = measure(world, db)
        assert durable.recover("big", world=world).to_state() == state
    print(f"{STEPS} steps")
    print(f"{'':>8}{'events':>10}{'payload bytes':>16}{'file bytes':>14}")
    print(f"{'before':>8}{before[0]:>10}{before[1]:>16}{before[2]:>14}")
    print(f"{'after':>8}{after[0]:>10}{after[1]:>16}{after[2]:>14}")
    print(f"the file is {after[2] / before[2]:.0%} of its size before compaction")


if __name__ == "__main__":
    main()
