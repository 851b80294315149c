"""Type-checker expectations for the decorators (checked by mypy in CI, not run)."""

from __future__ import annotations

from typing import assert_type

import durable


@durable.step
async def bare(x: int) -> str:
    return str(x)


@durable.step(max_visits=3)
async def with_options(x: int, *, flag: bool = False) -> list[int]:
    return [x]


@durable.tool(idempotent=True)
def sync_tool(name: str) -> int:
    return len(name)


@durable.model_call(slot="worker")
async def ask(prompt: str) -> str:
    return prompt


@durable.workflow
async def wf(x: int) -> str:
    return await bare(x)


async def use() -> None:
    assert_type(await bare(1), str)
    assert_type(await with_options(1, flag=True), list[int])
    assert_type(sync_tool("a"), int)
    assert_type(await ask("q"), str)
    assert_type(await wf(2), str)
