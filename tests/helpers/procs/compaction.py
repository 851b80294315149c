"""Programs that the crash tests run in child processes.

``python -m tests.helpers.procs.compaction run DATA_DIR RUN_ID CALLS [KILL_AT_STEP]`` drives
the five-step workflow (SIGKILLing itself inside step ``KILL_AT_STEP``);
``compact DATA_DIR RUN_ID STATEMENT`` compacts the run and SIGKILLs itself
when SQLite starts executing a statement of the compaction's transaction
(from the snapshot's insert on) that begins with ``STATEMENT``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import durable

_calls_file: Path | None = None
_kill_at: int | None = None


def _count(name: str) -> None:
    assert _calls_file is not None
    with _calls_file.open("a") as f:
        f.write(name + "\n")


@durable.step(max_visits=5)
async def work(i: int) -> int:
    if _kill_at == i:
        os.kill(os.getpid(), signal.SIGKILL)
    _count(f"work {i}")
    return i * i


@durable.workflow
async def five_steps() -> int:
    return sum([await work(i) for i in range(5)])


def main(argv: list[str]) -> None:
    global _calls_file, _kill_at
    command, data_dir, run_id = argv[:3]
    world = durable.local_world(data_dir)
    if command == "run":
        _calls_file = Path(argv[3])
        _kill_at = int(argv[4]) if len(argv) > 4 else None
        print(asyncio.run(durable.run_workflow(five_steps, world=world, run_id=run_id)))
    elif command == "compact":
        prefix = argv[3]
        armed = False

        def trace(statement: str) -> None:
            # Armed by the snapshot's insert, so a COMMIT of the fencing transaction before it is spared.
            nonlocal armed
            armed = armed or statement.startswith("INSERT INTO events")
            if armed and statement.startswith(prefix):
                os.kill(os.getpid(), signal.SIGKILL)

        world.log._db.set_trace_callback(trace)  # type: ignore[attr-defined]
        durable.compact(run_id, world=world)
    world.close()


if __name__ == "__main__":
    main(sys.argv[1:])
