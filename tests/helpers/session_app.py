"""The code of the recorded agent-session run (``tests/data/orchestrator_session.jsonl``).

The run's manifests name these functions by module, and the run was recorded
with them in module ``tests.test_recorded_sessions``: the recorded-log test
imports this file under that name (``import_as``), so moving the file changes
nothing the log records.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import durable

MODELS = {"orchestrator": "gpt-5"}
CALLS: Counter[str] = Counter()


@durable.tool(name="lookup", idempotent=True)
async def lookup(q: str) -> str:
    CALLS["lookup"] += 1
    return q.upper()


@durable.tool(name="lookup", idempotent=True)
async def lookup_v2(q: str, limit: int = 3) -> str:
    CALLS["lookup"] += 1
    return q.upper()


@durable.workflow(name="scoring")
async def scoring(cid: str) -> int:
    return len(cid)


@durable.model_call(slot="orchestrator", name="think")
async def think(turn: int) -> str:
    CALLS["think"] += 1
    return f"answer {turn}"


def build(tool: Any) -> Any:
    @durable.workflow(name="orchestrate")
    async def orchestrate(cid: str) -> str:
        async with durable.session("orchestrator", tools=[tool], workflows=[scoring]):
            first = await think(0)
            found = await tool(cid)
            go = durable.interrupt("approve?")
            return f"{first}/{found}/{go}"

    return orchestrate
