"""The memory store across real processes: SIGKILL inside a put, and two writers at once, on both stores.

On Postgres the processes open one schema of a server with pgvector, as
workers on several machines open one world.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.helpers.pg import drop_schema, new_schema

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # each test starts two or three Python processes


class Store:
    """Where the children's memory lives: a data directory, or a Postgres schema beside it."""

    def __init__(self, data: Path, dsn: str | None):
        self.data = data
        self.dsn = dsn
        self.schema = new_schema() if dsn else None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CHILD_")}
        if self.dsn and self.schema:
            env |= {"MEMORY_CHILD_DSN": self.dsn, "MEMORY_CHILD_SCHEMA": self.schema}
        return env

    def world(self) -> durable.World:
        if self.dsn and self.schema:
            return durable.postgres_world(self.dsn, schema=self.schema, max_size=2)
        return durable.local_world(self.data)

    def vectors(self, mem: durable.MemoryStore) -> int:
        if self.dsn:
            return int(run(mem.count()))  # an item and its vector are one row
        return int(mem._db.query("SELECT COUNT(*) FROM vectors")[0][0])


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    dsn = request.getfixturevalue("pgvector_server").dsn if request.param == "postgres" else None
    found = Store(tmp_path, dsn)
    yield found
    if dsn and found.schema:
        drop_schema(dsn, found.schema)


def child(store: Store, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.procs.memory_child", *args],
        cwd=ROOT,
        env=store.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def writes(data: Path) -> list[str]:
    path = data / "writes.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("where", ["before-write", "after-write"])
def test_kill_between_put_intent_and_receipt_then_resume(store: Store, where: str) -> None:
    """A put killed after its intent is re-driven by a new process and leaves exactly one item."""
    data = store.data
    proc = child(store, "put", str(data), "r", where)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    with store.world() as world:
        rows = [(t, json.loads(d)) for _, t, d in world.log.read("r")]
    intents = [d["key"] for t, d in rows if t == "effect.intent"]
    receipts = [d["key"] for t, d in rows if t == "effect.receipt"]
    assert intents[-1] == "tool:memory_put#1" and "tool:memory_put#1" not in receipts
    assert writes(data) == (["p0"] if where == "before-write" else ["p0", "p1"])

    proc = child(store, "put", str(data), "r")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"count": 3, "hits": ["p0", "p1", "p2"]}
    assert writes(data)[-2:] == ["p1", "p2"]  # p1 re-driven once, p0 never written again
    assert writes(data).count("p0") == 1
    with store.world() as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=32))
        assert run(mem.count()) == 3
        assert store.vectors(mem) == 3  # no orphan vector
        item = run(mem.get(("facts",), "p1"))
        assert item is not None and item.text == "bo rides a bike"


def test_two_processes_write_and_search_one_store_at_once(store: Store) -> None:
    """Two processes putting and searching at the same time lose nothing and see each other."""
    count = 300
    procs = [child(store, "writer", str(store.data), prefix, str(count)) for prefix in ("a", "b")]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert max(json.loads(o)["seen"] for o, _ in outs) == 2 * count  # the later one saw both
    with store.world() as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=32))
        assert run(mem.count()) == 2 * count
        assert store.vectors(mem) == 2 * count
        for prefix in ("a", "b"):
            hits = run(mem.search(("shared",), f"note {prefix} number 7", k=1))
            assert [h.key for h in hits] == [f"{prefix}-7"]
