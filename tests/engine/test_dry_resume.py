"""durable.dry_resume: a resume under the current code, without running a body or writing (every backend)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import CapabilityDriftError, NondeterminismError, RunInterrupted, RunNotFoundError
from durable.testing import replay_file, run_with_crash
from durable.worlds import export_run


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def rows(world: durable.World, run_id: str) -> list[Any]:
    return list(world.log.read(run_id))


def pipeline(calls: Counter[str], *, scale: bool = False, insert: bool = False) -> Any:
    """Three steps, then a question; ``scale`` changes a step's signature, ``insert`` adds a call."""
    if scale:

        @durable.step
        async def load(value: int) -> int:  # a renamed parameter: drift (a new defaulted one is not)
            calls["load"] += 1
            return value

    else:

        @durable.step
        async def load(x: int) -> int:
            calls["load"] += 1
            return x

    @durable.step
    async def audit(x: int) -> int:
        calls["audit"] += 1
        return x

    @durable.step
    async def add(x: int) -> int:
        calls["add"] += 1
        return x + 1

    @durable.step
    async def save(x: int) -> int:
        calls["save"] += 1
        return x * 10

    @durable.workflow(name="pipeline")
    async def wf(x: int) -> int:
        y = await load(x)
        if insert:
            y = await audit(y)
        y = await save(await add(y))
        return y + int(durable.interrupt("go?"))

    return wf


def test_unchanged_code_is_ok_and_continues_at_the_question(world: durable.World) -> None:
    """An interrupted run replays to its question: ok, no body runs, not a row is written."""
    calls: Counter[str] = Counter()
    wf = pipeline(calls)
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, 1, world=world, run_id="d1"))
    before, ran = rows(world, "d1"), dict(calls)
    got = run(durable.dry_resume(wf, "d1", world=world))
    assert (got.ok, got.continues_at, got.waits_for) == (True, "interrupt#3", "an answer")
    assert dict(calls) == ran
    assert rows(world, "d1") == before


def test_a_cut_run_reports_the_first_call_that_would_execute_without_running_it(world: durable.World) -> None:
    """A run cut after its first step: continues_at names the next step, whose body does not run."""
    calls: Counter[str] = Counter()
    wf = pipeline(calls)
    crash = run(run_with_crash(wf, 1, world=world, crash_after=2, run_id="d2"))
    assert crash.crashed
    before, ran = rows(world, "d2"), dict(calls)
    got = run(durable.dry_resume(wf, "d2", world=world))
    assert got.ok and got.continues_at == "add"
    assert dict(calls) == ran  # the cut process ran add, whose commit was lost; the dry resume did not
    assert rows(world, "d2") == before


def test_a_changed_signature_of_a_used_step_is_the_drift_a_resume_would_raise(world: durable.World) -> None:
    """The new code's drift is reported with its keys and diff; nothing is written."""
    calls: Counter[str] = Counter()
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(pipeline(calls), 1, world=world, run_id="d3"))
    before = rows(world, "d3")
    got = run(durable.dry_resume(pipeline(calls, scale=True), "d3", world=world))
    assert not got.ok
    assert isinstance(got.error, CapabilityDriftError)
    assert [c.key for c in got.changes] == ["steps.load.signature"]
    assert "steps.load.signature" in got.detail()
    assert rows(world, "d3") == before


def test_an_inserted_call_is_the_nondeterminism_a_resume_would_raise(world: durable.World) -> None:
    """A call inserted between recorded ones fails the dry resume with NondeterminismError; no body runs."""
    calls: Counter[str] = Counter()
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(pipeline(calls), 1, world=world, run_id="d4"))
    before, ran = rows(world, "d4"), dict(calls)
    got = run(durable.dry_resume(pipeline(calls, insert=True), "d4", world=world))
    assert not got.ok and isinstance(got.error, NondeterminismError)
    assert "would fail: NondeterminismError" in got.line()
    assert dict(calls) == ran
    assert rows(world, "d4") == before


def test_a_dry_resume_leaves_the_run_resumable_as_before(world: durable.World) -> None:
    """After a dry resume the real resume completes the run, each body having run once."""
    calls: Counter[str] = Counter()
    wf = pipeline(calls)
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, 1, world=world, run_id="d5"))
    run(durable.dry_resume(wf, "d5", world=world))
    assert run(durable.run_workflow(wf, 1, world=world, run_id="d5", resume="5")) == 25
    assert (calls["load"], calls["add"], calls["save"]) == (1, 1, 1)


def test_an_unknown_run_is_refused_with_where_to_look(world: durable.World) -> None:
    """dry_resume of a run the world does not have raises RunNotFoundError naming `little runs`."""
    with pytest.raises(RunNotFoundError, match="little runs"):
        run(durable.dry_resume(pipeline(Counter()), "nope", world=world))


@durable.workflow
async def mailbox(x: int) -> Any:
    return await durable.recv("q", timeout=3600)


def test_a_run_whose_message_waits_continues_at_its_recv_and_the_message_stays(world: durable.World) -> None:
    """A message sent to a run waiting at recv: the dry resume stops at the recv, consuming nothing."""

    async def go() -> durable.DryResume:
        with pytest.raises(TimeoutError):  # the drive waits at the recv, then its process is gone
            await asyncio.wait_for(durable.run_workflow(mailbox, 1, world=world, run_id="m"), 0.5)
        await durable.send("m", "hello", topic="q", world=world)
        return await durable.dry_resume(mailbox, "m", world=world)

    before = rows(world, "m") if world.log.info("m") else []
    got = run(go())
    assert before == []
    assert got.ok
    assert got.continues_at == "recv#0"
    assert [t for _, t, _ in rows(world, "m")] == ["run.started", "message.waiting"]
    assert run(durable.run_workflow(mailbox, 1, world=world, run_id="m")) == "hello"  # still in its mailbox


def test_an_exported_run_cancelled_at_its_question_replays_as_far_as_the_question(
    world: durable.World, tmp_path: Path
) -> None:
    """replay_file of a run cancelled while it waited for an answer replays its calls, stopping there."""
    calls: Counter[str] = Counter()
    wf = pipeline(calls)

    async def go() -> None:
        with pytest.raises(RunInterrupted):
            await durable.run_workflow(wf, 4, world=world, run_id="c")
        await durable.handle("c", world=world).cancel()
        assert await durable.handle("c", world=world).status() == "cancelled"

    run(go())
    exported = tmp_path / "c.json"
    exported.write_text(json.dumps(export_run(world, "c")))
    got = replay_file(exported, wf)
    assert got.ok, got.line()
    assert (got.status, got.continues_at, got.waits_for) == ("cancelled", "interrupt#3", "an answer")
    assert calls == Counter(load=1, add=1, save=1)  # recorded: replayed, not called again
