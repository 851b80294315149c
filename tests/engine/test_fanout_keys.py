"""A fan-out records its branch keys; a resume with other keys or another name fails closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
import durable.testing
from tests.conftest import Worlds
from tests.helpers.crash import on


def _app(key: Any, name: str, calls: list[str]) -> Any:
    @durable.tool
    async def notify(cid: str) -> str:
        calls.append(cid)
        return cid

    @durable.step
    async def one(cid: str) -> str:
        return await notify(cid)

    @durable.workflow
    async def wf(cids: list[str]) -> list[str]:
        out = await durable.parallel(name, cids, one, key=key)
        return list(out)

    return wf


def _crash_after_first_branch(worlds: Worlds, calls: list[str]) -> None:
    wf = _app(lambda c: c, "notify", calls)
    with pytest.raises(durable.testing.SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                wf, ["a", "b"], world=worlds.crashing(on("step.completed", '"path":"notify[b]')), run_id="r"
            )
        )


@pytest.mark.parametrize(
    ("key", "name", "words"),
    [
        (lambda c: c.upper(), "notify", ["['a', 'b']", "['A', 'B']"]),
        (lambda c: c, "tell", ["parallel('notify')", "parallel('tell')"]),
    ],
)
def test_a_changed_key_function_or_name_is_nondeterminism(
    worlds: Worlds, key: Any, name: str, words: list[str]
) -> None:
    """Re-keyed or renamed after a crash: no branch runs again; the error names old and new."""
    calls: list[str] = []
    _crash_after_first_branch(worlds, calls)
    before = list(calls)
    with pytest.raises(durable.NondeterminismError) as info:
        asyncio.run(durable.run_workflow(_app(key, name, calls), ["a", "b"], world=worlds.open(), run_id="r"))
    for word in words:
        assert word in str(info.value)
    assert calls == before  # nothing ran again, the plain tool least of all


def test_the_same_fan_out_resumes(worlds: Worlds) -> None:
    """The recorded keys match: committed branches replay and only the rest runs."""
    calls: list[str] = []
    _crash_after_first_branch(worlds, calls)
    wf = _app(lambda c: c, "notify", calls)
    out = asyncio.run(durable.run_workflow(wf, ["a", "b"], world=worlds.open(), run_id="r"))
    assert out == ["a", "b"]
    assert sorted(calls) == ["a", "b"]  # each plain tool call was made once, across the crash
