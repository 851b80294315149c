"""Type-checker expectations for sessions and streams (checked by mypy, not run)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import assert_type

import durable


@durable.tool
async def lookup(q: str) -> str:
    return q


@durable.step(role="fixer", tools=[lookup], model_slot="worker")
async def repair(line: int) -> str:
    return str(line)


@durable.model_call(slot="worker")
async def stream(prompt: str) -> AsyncIterator[str]:
    yield prompt


async def use() -> None:
    async with durable.session("worker", tools=[lookup]) as s:
        assert_type(s, durable.Session)
        assert_type(s.model, str | None)
        assert_type(durable.scratch_dir(), Path)
        assert_type(await repair(1), str)
        async for chunk in stream("q"):
            assert_type(chunk, str)
