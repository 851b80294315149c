"""Child processes for the memory store's crash and concurrency tests.

Usage:
    python -m tests.helpers.procs.memory_child put DATA_DIR RUN_ID [before-write|after-write]
    python -m tests.helpers.procs.memory_child writer DATA_DIR PREFIX COUNT

``put`` runs a workflow that puts three items (``p0``, ``p1``, ``p2``) and
prints the run's output as JSON. With a kill point, the first write of
``p1`` SIGKILLs the process just before or just after the store commits
it, which is after the put's intent and before its receipt. Every write
that commits is appended to ``DATA_DIR/writes.log`` (fsynced).

``writer`` puts COUNT items keyed ``PREFIX-i`` in batches of ten, searching
after each batch, and prints how many items it could see at the end.

With ``MEMORY_CHILD_DSN`` and ``MEMORY_CHILD_SCHEMA`` in the environment,
the world is that Postgres schema's (DATA_DIR still holds ``writes.log``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import durable
from durable.memory._pg_rows import PostgresRows
from durable.memory._tables import StoredRows

DIM = 32


def note(data: Path, line: str) -> None:
    with open(data / "writes.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def open_world(data: Path) -> durable.World:
    dsn = os.environ.get("MEMORY_CHILD_DSN")
    if dsn:
        return durable.postgres_world(dsn, schema=os.environ["MEMORY_CHILD_SCHEMA"], max_size=2)
    return durable.local_world(data)


def install_hooks(data: Path, where: str) -> None:
    rows_class: Any = PostgresRows if os.environ.get("MEMORY_CHILD_DSN") else StoredRows
    original = rows_class.write
    marker = data / "killed.marker"

    def write(self: Any, rows: Sequence[Any], vectors: list[list[float]]) -> int:
        keys = [r.key for r in rows]
        first_time = bool(where) and "p1" in keys and not marker.exists()
        if first_time:
            marker.write_text(where)
            if where == "before-write":
                os.kill(os.getpid(), signal.SIGKILL)
        n = original(self, rows, vectors)
        note(data, " ".join(keys))
        if first_time and where == "after-write":
            os.kill(os.getpid(), signal.SIGKILL)
        return n

    rows_class.write = write


def put_main(data: Path, run_id: str, kill: str) -> None:
    install_hooks(data, kill)
    world = open_world(data)
    mem = world.memory.configure(durable.lexical_embedder(dim=DIM))

    @durable.workflow
    async def remember(facts: list[str]) -> dict[str, Any]:
        for i, fact in enumerate(facts):
            await mem.put(("facts",), f"p{i}", fact)
        hits = await mem.search(("facts",), "green tea", k=3)
        return {"count": await mem.count(), "hits": [h.key for h in hits]}

    facts = ["ada drinks green tea", "bo rides a bike", "cy paints walls"]
    out = asyncio.run(durable.run_workflow(remember, facts, world=world, run_id=run_id))
    print(json.dumps(out))
    world.close()


async def writer(mem: durable.MemoryStore, prefix: str, count: int) -> int:
    for start in range(0, count, 10):
        await mem.put_many(
            {"namespace": ("shared",), "key": f"{prefix}-{i}", "text": f"note {prefix} number {i}"}
            for i in range(start, min(count, start + 10))
        )
        await mem.search(("shared",), f"note {prefix}", k=5)
    return await mem.count(("shared",))


def writer_main(data: Path, prefix: str, count: int) -> None:
    with open_world(data) as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=DIM))
        print(json.dumps({"seen": asyncio.run(writer(mem, prefix, count))}))


if __name__ == "__main__":
    mode, data_dir = sys.argv[1], Path(sys.argv[2])
    if mode == "put":
        put_main(data_dir, sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        writer_main(data_dir, sys.argv[3], int(sys.argv[4]))
