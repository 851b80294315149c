"""Confirmed effects: a crash at every boundary of intent → call → receipt → commit."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import durable
from durable import UnknownCommitError
from durable.engine._recorded import Recorded
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on

KINDS = ["idempotent", "reconcile", "plain", "model"]


def build(kind: str, calls: Counter[str], reconciled: dict[str, Any]) -> Any:
    """A workflow whose step calls one effect of ``kind``, then yields before committing."""

    def reconcile(key: str, inp: dict[str, Any]) -> Any:
        calls["reconcile"] += 1
        return reconciled.get("answer", durable.NEVER_HAPPENED)

    if kind == "model":

        @durable.model_call(slot="worker", name="fx")
        async def fx(x: int) -> int:
            calls["body"] += 1
            calls["key:" + durable.idempotency_key()] += 1
            return x * 2

    else:
        options: dict[str, Any] = {
            "idempotent": {"idempotent": True},
            "reconcile": {"reconcile": reconcile},
            "plain": {},
        }[kind]

        @durable.tool(name="fx", **options)
        async def fx(x: int) -> int:
            calls["body"] += 1
            calls["key:" + durable.idempotency_key()] += 1
            return x * 2

    @durable.step
    async def use(x: int) -> int:
        y = await fx(x)
        await asyncio.sleep(0)  # lets the buffered receipt become durable before the commit
        return y + 1

    @durable.workflow(name="wf")
    async def wf(x: int) -> int:
        return await use(x)

    return wf


def confirmed(world: durable.World, run_id: str) -> set[str]:
    rec = Recorded.from_rows(world.log.read(run_id))
    return {k for k in rec.intents if k in rec.receipts}


@pytest.mark.parametrize("kind", KINDS)
def test_crash_before_intent_runs_the_call_once(worlds: Worlds, kind: str) -> None:
    """Nothing was recorded, so the resume makes the call, exactly once in all."""
    calls: Counter[str] = Counter()
    wf = build(kind, calls, {})
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, 3, world=worlds.crashing(on("effect.intent")), run_id="r"))
    assert calls["body"] == 0
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r")) == 7
    assert calls["body"] == 1
    assert confirmed(world, "r") == {"use.tool:fx#0" if kind != "model" else "use.model:fx#0"}


@pytest.mark.parametrize("kind", KINDS)
def test_crash_after_intent_before_receipt(worlds: Worlds, kind: str) -> None:
    """Unknown commit: models reissue, idempotent tools re-drive, reconcile asks, plain tools fail."""
    calls: Counter[str] = Counter()
    reconciled: dict[str, Any] = {}
    wf = build(kind, calls, reconciled)
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, 3, world=worlds.crashing(on("effect.receipt")), run_id="r"))
    assert calls["body"] == 1
    world = worlds.open()
    rec = Recorded.from_rows(world.log.read("r"))
    assert len(rec.unconfirmed()) == 1
    if kind == "plain":
        with pytest.raises(UnknownCommitError) as info:
            asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r"))
        assert info.value.key == rec.unconfirmed()[0]
        assert calls["body"] == 1
        return
    if kind == "reconcile":
        reconciled["answer"] = 6  # the external system says: it happened, result 6
    assert asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r")) == 7
    expected_body = {"idempotent": 2, "model": 2, "reconcile": 1}[kind]
    assert calls["body"] == expected_body
    keys = [k for k in calls if k.startswith("key:")]
    assert len(keys) == 1, "a re-drive uses the same idempotency key"
    assert rec.unconfirmed()[0] in confirmed(world, "r")


def test_reconcile_that_says_never_happened_calls_again(worlds: Worlds) -> None:
    """When reconcile answers NEVER_HAPPENED the tool is called (once more) and confirmed."""
    calls: Counter[str] = Counter()
    wf = build("reconcile", calls, {})
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, 3, world=worlds.crashing(on("effect.receipt")), run_id="r"))
    assert asyncio.run(durable.run_workflow(wf, 3, world=worlds.open(), run_id="r")) == 7
    assert calls["reconcile"] == 1
    assert calls["body"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_crash_after_receipt_before_commit_uses_recorded_result(worlds: Worlds, kind: str) -> None:
    """A confirmed effect is never called again: its recorded result is used."""
    calls: Counter[str] = Counter()
    wf = build(kind, calls, {})
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, 3, world=worlds.crashing(on("step.completed")), run_id="r"))
    world = worlds.open()
    assert len(confirmed(world, "r")) == 1
    assert asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r")) == 7
    assert calls["body"] == 1
    assert calls["reconcile"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_crash_after_commit_replays_the_step(worlds: Worlds, kind: str) -> None:
    """After the step commit nothing inside the step runs again."""
    calls: Counter[str] = Counter()
    wf = build(kind, calls, {})
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, 3, world=worlds.crashing(on("run.completed")), run_id="r"))
    world = worlds.open()
    rec = Recorded.from_rows(world.log.read("r"))
    assert "use" in rec.steps_completed
    assert rec.terminal is None
    assert asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="r")) == 7
    assert calls["body"] == 1


def test_intent_is_durable_before_the_call_starts(worlds: Worlds) -> None:
    """When the tool body runs, its intent is already in the log (read by another connection)."""
    seen: list[bool] = []
    world = worlds.open()

    @durable.tool
    async def probe() -> int:
        other = worlds.open()
        rows = other.log.read("r")
        seen.append(any(t == "effect.intent" for _, t, _ in rows))
        return 1

    @durable.workflow
    async def wf() -> int:
        return await probe()

    asyncio.run(durable.run_workflow(wf, world=world, run_id="r"))
    assert seen == [True]


def test_error_receipt_replays_inside_unfinished_step(worlds: Worlds) -> None:
    """An error receipt recorded before a crash is re-raised from the log, not by calling again."""
    calls: Counter[str] = Counter()

    @durable.tool
    async def bad() -> int:
        calls["bad"] += 1
        raise KeyError("missing")

    @durable.step
    async def s() -> str:
        try:
            await bad()
        except KeyError as exc:
            return f"handled {exc}"
        return "no"

    @durable.workflow
    async def wf() -> str:
        return await s()

    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(wf, world=worlds.crashing(on("step.completed")), run_id="r"))
    assert asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="r")) == "handled 'missing'"
    assert calls["bad"] == 1
