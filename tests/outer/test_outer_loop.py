"""Outer loops: cycles under a supervisor, the manifest, and resuming at every commit point."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import durable
from durable import Continue, Done
from durable.engine._manifest import definition_hash
from durable.engine._spec import spec_of
from durable.outer._loop import _append_commit
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash
from tests.helpers.outer_loop_harness import (
    FINAL,
    MAX_CYCLES,
    Draft,
    Harness,
    arm_crash,
    expected_counts,
    manifest_json,
    run,
)

# -- running -------------------------------------------------------------------


def test_loop_runs_cycles_until_supervise_says_done(world: durable.World) -> None:
    """Each cycle is its own run; the loop ends when supervise returns Done, with its final output."""
    h = Harness()
    result = run(h.run(world))
    assert (result.final_output, result.ended, result.done) == (FINAL, "done", True)
    assert [c.number for c in result.cycles] == [1, 2, 3]
    assert len({c.run_id for c in result.cycles}) == 3
    assert [world.runs(status="completed")[i].workflow for i in range(3)] == ["revise"] * 3
    assert h.runs == expected_counts()


def test_supervise_gets_number_input_output_and_history(world: durable.World) -> None:
    """The Cycle handed to supervise carries the cycle's number, input, output and earlier cycles."""
    h = Harness()
    seen: list[durable.Cycle] = []

    def supervise(cycle: durable.Cycle) -> Done[Draft] | Continue[Draft]:
        seen.append(cycle)
        return h.supervise(cycle)

    run(h.run(world, supervise=supervise))
    third = seen[2]
    assert (third.number, third.input, third.output) == (3, Draft(text="d**", round=2), FINAL)
    assert [(r.number, r.input, r.output, r.decision) for r in third.history] == [
        (1, Draft(text="d"), Draft(text="d*", round=1), "continue"),
        (2, Draft(text="d*", round=1), Draft(text="d**", round=2), "continue"),
    ]
    assert third.history[0].summary == "round 1 polished"
    assert (third.max_cycles, third.is_last, seen[0].history) == (MAX_CYCLES, False, ())


def test_async_supervise_is_awaited(world: durable.World) -> None:
    """An async supervise function works like a sync one."""
    h = Harness()

    async def supervise(cycle: durable.Cycle) -> Done[Draft] | Continue[Draft]:
        await asyncio.sleep(0)
        return h.supervise(cycle)

    assert run(h.run(world, supervise=supervise)).final_output == FINAL


def test_max_cycles_without_done_ends_with_the_last_output(world: durable.World) -> None:
    """After max_cycles cycles without Done the loop ends as max_cycles with the last cycle's output."""
    h = Harness(accept_at=99)
    result = run(h.run(world, max_cycles=2))
    assert (result.ended, result.done, result.final_output) == (
        "max_cycles",
        False,
        Draft(text="d**", round=2),
    )
    assert h.runs["supervise:2"] == 1
    assert manifest_json(world)["result"] == {
        "kind": "max_cycles",
        "finalOutput": {"text": "d**", "round": 2},
    }


def test_done_on_the_last_cycle_counts_as_done(world: durable.World) -> None:
    """Supervise is asked about the last cycle too, and its Done there ends the loop as done."""
    h = Harness(accept_at=2)
    seen: list[bool] = []

    def supervise(cycle: durable.Cycle) -> Done[Draft] | Continue[Draft]:
        seen.append(cycle.is_last)
        return h.supervise(cycle)

    result = run(h.run(world, supervise=supervise, max_cycles=2))
    assert (result.ended, result.final_output, seen) == ("done", Draft(text="d**", round=2), [False, True])


def test_manifest_holds_goal_input_cycles_and_result(world: durable.World) -> None:
    """The manifest has exactly the documented fields, in camelCase, with the committed cycles."""
    h = Harness()
    result = run(h.run(world, description="polish a draft"))
    m = manifest_json(world)
    first_run = world.events(result.cycles[0].run_id)[0]
    assert list(m) == [
        "outerLoopId",
        "goal",
        "maxCycles",
        "inputHash",
        "cycles",
        "pendingCycleRunId",
        "result",
    ]
    assert m["goal"] == {
        "workflowDefinitionHash": definition_hash(spec_of(h.workflow)),  # type: ignore[arg-type]
        "description": "polish a draft",
    }
    assert (m["outerLoopId"], m["maxCycles"], m["pendingCycleRunId"]) == ("ol_test", MAX_CYCLES, None)
    assert m["inputHash"] == first_run.input_hash  # type: ignore[union-attr]
    assert m["cycles"][0] == {
        "cycleNumber": 1,
        "runId": result.cycles[0].run_id,
        "status": "completed",
        "output": {"text": "d*", "round": 1},
        "summary": "round 1 polished",
    }
    assert "summary" not in m["cycles"][2]
    assert m["result"] == {"kind": "done", "finalOutput": {"text": "d***", "round": 3}}


def test_manifest_file_lives_under_outer_loops(tmp_path: Any) -> None:
    """A local world writes outer-loops/<outer_loop_id>.json in its data directory and no temporary files."""
    with durable.local_world(tmp_path) as world:
        run(Harness().run(world))
    assert sorted(p.name for p in (tmp_path / "outer-loops").iterdir()) == ["ol_test.json"]


def test_each_cycle_commits_supervise_answer_to_its_own_log(world: durable.World) -> None:
    """Each cycle's run ends with one outer_loop.cycle_completed holding supervise's answer."""
    result = run(Harness().run(world))
    commits = [world.events(c.run_id)[-1] for c in result.cycles]
    assert [e.type for e in commits] == ["outer_loop.cycle_completed"] * 3
    assert [(e.cycle, e.decision, e.summary) for e in commits] == [  # type: ignore[union-attr]
        (1, "continue", "round 1 polished"),
        (2, "continue", "round 2 polished"),
        (3, "done", None),
    ]
    assert commits[0].next_input == {"text": "d*", "round": 1}  # type: ignore[union-attr]
    assert commits[2].final_output == {"text": "d***", "round": 3}  # type: ignore[union-attr]


def test_finished_loop_returns_its_result_without_running_anything(worlds: Worlds) -> None:
    """Calling a finished loop again returns the same result; no step and no supervise runs."""
    h = Harness()
    first = run(h.run(worlds.open()))
    again = run(h.run(worlds.open()))
    assert again == first
    assert h.runs == expected_counts()


def test_final_output_is_the_recorded_value_for_every_caller(worlds: Worlds) -> None:
    """A Done value that is not the workflow's output type comes back as the same JSON data each time."""
    h = Harness()

    def supervise(cycle: durable.Cycle) -> Done[Any] | Continue[Any]:
        return Done({"accepted": cycle.output.text, "cycles": cycle.number})

    first = run(h.run(worlds.open(), supervise=supervise))
    again = run(h.run(worlds.open(), supervise=supervise))
    assert first.final_output == again.final_output == {"accepted": "d*", "cycles": 1}


# -- resuming at every commit point -----------------------------------------------

POINTS = ["before_pending", "mid_cycle", "after_commit", "after_manifest"]


@pytest.mark.parametrize("cycle", [1, 2, 3])
@pytest.mark.parametrize("point", POINTS)
def test_resume_after_a_crash_at_each_commit_point(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, point: str, cycle: int
) -> None:
    """A crash at any commit point of any cycle resumes to the same output, running everything once."""
    h = Harness()
    arm_crash(monkeypatch, h, point, cycle)
    with pytest.raises(SimulatedCrash):
        run(h.run(worlds.open()))
    world = worlds.open()
    result = run(h.run(world))
    assert result.final_output == FINAL
    assert h.runs == expected_counts()
    assert len(world.runs()) == 3  # the pending run id was reused, no cycle ran in two runs
    assert manifest_json(world)["pendingCycleRunId"] is None


def test_mid_cycle_crash_reuses_the_pending_run_id(worlds: Worlds) -> None:
    """A crash inside cycle 2 leaves its run id pending; the resume finishes that same run."""
    h = Harness()
    h.crash_in_polish, h.crash = 2, SimulatedCrash
    with pytest.raises(SimulatedCrash):
        run(h.run(worlds.open()))
    pending = manifest_json(worlds.open())["pendingCycleRunId"]
    result = run(h.run(worlds.open()))
    assert result.cycles[1].run_id == pending
    assert h.runs["write:2"] == 1


def test_committed_cycle_is_never_supervised_again(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a crash between the cycle commit and the manifest update, the log's answer wins."""
    h = Harness()
    arm_crash(monkeypatch, h, "after_commit", 1)
    with pytest.raises(SimulatedCrash):
        run(h.run(worlds.open()))

    def changed_mind(cycle: durable.Cycle) -> Done[Any] | Continue[Any]:
        if cycle.number == 1:
            return Done("asked twice about cycle 1")
        return h.supervise(cycle)

    result = run(h.run(worlds.open(), supervise=changed_mind))
    assert (result.final_output, result.cycles[0].decision) == (FINAL, "continue")


def test_first_cycle_commit_in_a_log_is_authoritative(world: durable.World) -> None:
    """Appending a second commit to a cycle's log returns the first one and writes nothing."""
    result = run(Harness().run(world))
    run_id = result.cycles[0].run_id
    before = world.events(run_id)
    got = run(_append_commit(world, run_id, {"outer_loop_id": "ol_test", "cycle": 1, "decision": "done"}))
    assert got["decision"] == "continue"
    assert world.events(run_id) == before


# -- one driver at a time -------------------------------------------------------------


def test_concurrent_callers_share_one_driver(worlds: Worlds) -> None:
    """Two callers of one loop at once get the same result, and supervise runs once per cycle."""
    h = Harness()

    async def both() -> tuple[durable.OuterLoopResult, durable.OuterLoopResult]:
        first, second = await asyncio.gather(h.run(worlds.open()), h.run(worlds.open()))
        return first, second

    first, second = run(both())
    assert first == second
    assert first.final_output == FINAL
    assert h.runs == expected_counts()


async def _while_busy(
    h: Harness, worlds: Worlds, second: Callable[[], Awaitable[None]]
) -> durable.OuterLoopResult:
    """Start a caller that drives the loop and holds it in supervise; run ``second``; let it finish."""
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow_supervise(cycle: durable.Cycle) -> Done[Draft] | Continue[Draft]:
        entered.set()
        await gate.wait()
        return h.supervise(cycle)

    first = asyncio.create_task(h.run(worlds.open(), supervise=slow_supervise))
    await entered.wait()
    await second()
    gate.set()
    return await first


def test_waiting_caller_honours_its_timeout(worlds: Worlds) -> None:
    """A caller that waits on a busy loop gives up at its own timeout; the first caller finishes."""
    h = Harness()

    async def times_out() -> None:
        with pytest.raises(durable.RunTimeoutError, match="ol_test"):
            await h.run(worlds.open(), timeout=0)

    assert run(_while_busy(h, worlds, times_out)).final_output == FINAL
    assert h.runs == expected_counts()


def test_waiting_caller_can_be_cancelled(worlds: Worlds) -> None:
    """Cancelling a caller that waits on a busy loop leaves the driving caller undisturbed."""
    h = Harness()

    async def is_cancelled() -> None:
        waiter = asyncio.create_task(h.run(worlds.open()))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    assert run(_while_busy(h, worlds, is_cancelled)).final_output == FINAL
    assert h.runs == expected_counts()


def test_interrupted_cycle_is_answered_then_the_loop_resumes(worlds: Worlds) -> None:
    """A cycle waiting on an interrupt stops the loop; answered through run_workflow, the loop goes on."""

    @durable.workflow
    async def approve(x: int) -> int:
        if x == 2:
            return x + int(durable.interrupt("need approval"))
        return x + 1

    def supervise(cycle: durable.Cycle) -> Done[int] | Continue[int]:
        return Done(cycle.output) if cycle.number == 3 else Continue(cycle.output)

    def loop(world: durable.World) -> durable.OuterLoopResult:
        return run(  # type: ignore[no-any-return]
            durable.run_outer_loop(
                approve, 1, supervise=supervise, max_cycles=3, outer_loop_id="ol", world=world
            )
        )

    with pytest.raises(durable.RunInterrupted) as info:
        loop(worlds.open())
    world = worlds.open()
    assert info.value.run_id == manifest_json(world, "ol")["pendingCycleRunId"]
    assert run(durable.run_workflow(approve, 2, world=world, run_id=info.value.run_id, resume="10")) == 12
    result = loop(worlds.open())
    assert (result.final_output, result.cycles[1].run_id) == (13, info.value.run_id)
