"""The memory store across real processes: SIGKILL inside a put, and two writers at once."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durable

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # each test starts two or three Python processes


def child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.procs.memory_child", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def writes(data: Path) -> list[str]:
    path = data / "writes.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("where", ["before-write", "after-write"])
def test_kill_between_put_intent_and_receipt_then_resume(tmp_path: Path, where: str) -> None:
    """A put killed after its intent is re-driven by a new process and leaves exactly one item."""
    proc = child("put", str(tmp_path), "r", where)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    with durable.local_world(tmp_path) as world:
        rows = [(t, json.loads(d)) for _, t, d in world.log.read("r")]
    intents = [d["key"] for t, d in rows if t == "effect.intent"]
    receipts = [d["key"] for t, d in rows if t == "effect.receipt"]
    assert intents[-1] == "tool:memory_put#1" and "tool:memory_put#1" not in receipts
    assert writes(tmp_path) == (["p0"] if where == "before-write" else ["p0", "p1"])

    proc = child("put", str(tmp_path), "r")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"count": 3, "hits": ["p0", "p1", "p2"]}
    assert writes(tmp_path)[-2:] == ["p1", "p2"]  # p1 re-driven once, p0 never written again
    assert writes(tmp_path).count("p0") == 1
    with durable.local_world(tmp_path) as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=32))
        assert asyncio.run(mem.count()) == 3
        assert mem._db.query("SELECT COUNT(*) FROM vectors")[0][0] == 3  # no orphan vector
        item = asyncio.run(mem.get(("facts",), "p1"))
        assert item is not None and item.text == "bo rides a bike"


def test_two_processes_write_and_search_one_store_at_once(tmp_path: Path) -> None:
    """Two processes putting and searching at the same time lose nothing and see each other."""
    count = 300
    procs = [child("writer", str(tmp_path), prefix, str(count)) for prefix in ("a", "b")]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert max(json.loads(o)["seen"] for o, _ in outs) == 2 * count  # the later one saw both
    with durable.local_world(tmp_path) as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=32))
        assert asyncio.run(mem.count()) == 2 * count
        assert mem._db.query("SELECT COUNT(*) FROM vectors")[0][0] == 2 * count
        for prefix in ("a", "b"):
            hits = asyncio.run(mem.search(("shared",), f"note {prefix} number 7", k=1))
            assert [h.key for h in hits] == [f"{prefix}-7"]
