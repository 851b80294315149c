"""Moving durable's own modules must not change a recorded manifest: its hash is pinned here."""

from __future__ import annotations

import asyncio
import json

import pytest

import durable
from tests.helpers.codegen import load_source

APP = """
import durable

@durable.step(retry=durable.RetryPolicy(max_attempts=3, backoff=0.5, give_up_on=(KeyError,)))
async def scored(x: int) -> int:
    return x * 2

@durable.tool(idempotent=True)
async def send(x: int) -> str:
    return f"sent {x}"

@durable.model_call(slot="worker")
async def ask(q: str) -> str:
    return q.upper()

@durable.workflow
async def child(x: int) -> int:
    return x + 1

@durable.workflow(uses=[scored, send, ask, child])
async def flow(x: int) -> dict:
    a = await scored(x)
    return {"a": a, "b": await send(a), "c": await ask("hi"), "d": await child(a)}
"""

# Recorded before durable's modules moved into folders; a retry policy, a
# lexical embedder and the memory section all feed it.
PINNED_MANIFEST_HASH = "sha256:62ef19674b2a8d5e7febd58f644dd55e9bad2f7086faa763f2444adf120af31b"


def test_manifest_hash_is_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workflow with a retry policy, effects, a child run and memory keeps its recorded manifest hash."""
    app = load_source(monkeypatch, "pinned_app", APP)
    world = durable.memory_world()
    world.memory.configure(durable.lexical_embedder(dim=16))
    run = durable.run_workflow(app.flow, 3, world=world, run_id="pinned", models={"worker": "m1"})
    asyncio.run(run)
    seq, kind, data = world.log.read("pinned")[0]
    assert (seq, kind) == (1, "run.started")
    started = json.loads(data)
    assert started["manifest"]["memory"]["embedder"] == "durable.lexical_hash_v1"
    assert started["manifest_hash"] == PINNED_MANIFEST_HASH
