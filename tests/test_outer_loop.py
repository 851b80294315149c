"""Outer loops: cycles under a supervisor, the manifest, and resuming at every commit point."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

import durable
from durable import Continue, Done, OuterLoopError, RunFailedError
from durable._manifest import definition_hash
from durable._outer import _append_commit
from durable._outer_manifest import ManifestStore, OuterLoopManifest
from durable._spec import spec_of
from tests.conftest import Worlds
from tests.crash import SimulatedCrash
from tests.outer_loop_harness import MAX_CYCLES, Draft, Harness, expected_counts


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def manifest_json(world: durable.World, outer_loop_id: str = "ol_test") -> dict[str, Any]:
    """The stored manifest as JSON data, read the way a person would read the file."""
    store = ManifestStore(world, outer_loop_id)
    text = (
        store.path.read_text() if store.path is not None else world.extensions["outer_loops"][outer_loop_id]
    )
    data: dict[str, Any] = json.loads(text)
    return data


def write_manifest_text(world: durable.World, text: str, outer_loop_id: str = "ol_test") -> None:
    """Replace the stored manifest with ``text`` (damaged or legacy content)."""
    store = ManifestStore(world, outer_loop_id)
    if store.path is not None:
        store.path.parent.mkdir(parents=True, exist_ok=True)
        store.path.write_text(text)
    else:
        world.extensions.setdefault("outer_loops", {})[outer_loop_id] = text


FINAL = Draft(text="d***", round=3)


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


def arm_crash(monkeypatch: pytest.MonkeyPatch, h: Harness, point: str, cycle: int) -> None:
    """Make the first process 'die' at ``point`` of cycle ``cycle``."""
    if point == "mid_cycle":
        h.crash_in_polish, h.crash = cycle, SimulatedCrash
        return
    original = ManifestStore.save
    armed = [True]

    def save(self: ManifestStore, m: OuterLoopManifest) -> None:
        pending_write = m.pendingCycleRunId is not None and len(m.cycles) == cycle - 1
        cycle_write = m.pendingCycleRunId is None and len(m.cycles) == cycle
        if armed[0] and point == "before_pending" and pending_write:
            armed[0] = False
            raise SimulatedCrash
        if armed[0] and point == "after_commit" and cycle_write:
            armed[0] = False
            raise SimulatedCrash
        original(self, m)
        if armed[0] and point == "after_manifest" and cycle_write:
            armed[0] = False
            raise SimulatedCrash

    monkeypatch.setattr(ManifestStore, "save", save)


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


# -- refusing a resume that does not match --------------------------------------------


def crash_after_cycle_1(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> Harness:
    h = Harness()
    with monkeypatch.context() as m:
        arm_crash(m, h, "after_manifest", 1)
        with pytest.raises(SimulatedCrash):
            run(h.run(worlds.open()))
    return h


@pytest.mark.parametrize("finished", [False, True])
def test_resume_with_another_workflow_fails_closed(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, finished: bool
) -> None:
    """Another workflow definition is outer_loop_goal_mismatch, before any cycle runs or a result returns."""
    h = Harness()
    if finished:
        run(h.run(worlds.open()))
    else:
        h = crash_after_cycle_1(worlds, monkeypatch)
    other = Harness()

    @durable.workflow(version=2)
    async def revise(d: Draft) -> Draft:
        return d

    other.workflow = revise
    world = worlds.open()
    runs_before = len(world.runs())
    with pytest.raises(RunFailedError) as info:
        run(other.run(world))
    assert (info.value.cause_code, info.value.reason) == ("runtime_config_error", "outer_loop_goal_mismatch")
    assert (len(world.runs()), sum(other.runs.values())) == (runs_before, 0)


@pytest.mark.parametrize("finished", [False, True])
def test_resume_with_other_max_cycles_fails_closed(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, finished: bool
) -> None:
    """Another max_cycles is outer_loop_max_cycles_mismatch, before any cycle runs or a result returns."""
    h = Harness()
    if finished:
        run(h.run(worlds.open()))
    else:
        h = crash_after_cycle_1(worlds, monkeypatch)
    before = Counter(h.runs)
    world = worlds.open()
    runs_before = len(world.runs())
    with pytest.raises(RunFailedError) as info:
        run(h.run(world, max_cycles=MAX_CYCLES + 1))
    assert (info.value.cause_code, info.value.reason) == (
        "runtime_config_error",
        "outer_loop_max_cycles_mismatch",
    )
    assert f"max_cycles={MAX_CYCLES}" in str(info.value)
    assert (len(world.runs()), h.runs) == (runs_before, before)


@pytest.mark.parametrize("finished", [False, True])
def test_resume_with_other_input_fails_closed(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, finished: bool
) -> None:
    """Another input is outer_loop_input_mismatch and says to use a new outer_loop_id."""
    h = Harness()
    if finished:
        run(h.run(worlds.open()))
    else:
        h = crash_after_cycle_1(worlds, monkeypatch)
    before = Counter(h.runs)
    world = worlds.open()
    with pytest.raises(RunFailedError) as info:
        run(
            durable.run_outer_loop(
                h.workflow,
                Draft(text="another draft"),
                supervise=h.supervise,
                max_cycles=MAX_CYCLES,
                outer_loop_id="ol_test",
                world=world,
            )
        )
    assert (info.value.cause_code, info.value.reason) == ("runtime_config_error", "outer_loop_input_mismatch")
    assert "new outer_loop_id" in str(info.value)
    assert h.runs == before


def _drop_input_hash(world: durable.World) -> None:
    data = manifest_json(world)
    del data["inputHash"]
    write_manifest_text(world, json.dumps(data))


def test_legacy_manifest_takes_input_identity_from_the_first_cycle(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest without inputHash compares the caller's input with the first cycle run's input."""
    h = crash_after_cycle_1(worlds, monkeypatch)
    _drop_input_hash(worlds.open())
    with pytest.raises(RunFailedError, match="another input") as info:
        run(
            durable.run_outer_loop(
                h.workflow,
                Draft(text="x"),
                supervise=h.supervise,
                max_cycles=MAX_CYCLES,
                outer_loop_id="ol_test",
                world=worlds.open(),
            )
        )
    assert info.value.reason == "outer_loop_input_mismatch"
    world = worlds.open()
    assert run(h.run(world)).final_output == FINAL
    assert (
        manifest_json(world)["inputHash"]
        == world.events(manifest_json(world)["cycles"][0]["runId"])[0].input_hash
    )  # type: ignore[union-attr]


def test_legacy_manifest_without_a_started_cycle_accepts_and_records_the_input(worlds: Worlds) -> None:
    """A manifest without inputHash and without any cycle run takes the caller's input as its identity."""
    world = worlds.open()
    goal = definition_hash(spec_of(Harness().workflow))  # type: ignore[arg-type]
    legacy = {
        "outerLoopId": "ol_test",
        "goal": {"workflowDefinitionHash": goal, "description": "old"},
        "maxCycles": MAX_CYCLES,
        "cycles": [],
        "pendingCycleRunId": None,
        "result": None,
    }
    write_manifest_text(world, json.dumps(legacy))
    h = Harness()
    assert run(h.run(world)).final_output == FINAL
    m = manifest_json(world)
    assert m["inputHash"] == world.events(m["cycles"][0]["runId"])[0].input_hash  # type: ignore[union-attr]
    assert m["goal"]["description"] == "old"


# -- damaged manifests and bad arguments ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"outerLoopId": "ol_test", "maxCycles": 5}',
        json.dumps(
            {
                "outerLoopId": "ol_test",
                "goal": {"workflowDefinitionHash": "sha256:x"},
                "maxCycles": 5,
                "inputHash": "sha256:y",
                "cycles": [{"cycleNumber": 2, "runId": "run_a", "status": "completed"}],
            }
        ),
        json.dumps(
            {
                "outerLoopId": "another_loop",
                "goal": {"workflowDefinitionHash": "sha256:x"},
                "maxCycles": 5,
            }
        ),
    ],
    ids=["not-json", "no-goal", "cycle-numbers", "other-loop"],
)
def test_damaged_manifest_raises_a_clear_error_naming_it(worlds: Worlds, text: str) -> None:
    """A damaged manifest raises OuterLoopError naming the file; nothing runs and the file is kept."""
    world = worlds.open()
    write_manifest_text(world, text)
    h = Harness()
    with pytest.raises(OuterLoopError, match="is damaged") as info:
        run(h.run(world))
    store = ManifestStore(world, "ol_test")
    assert (str(store.path) if store.path is not None else "'ol_test'") in str(info.value)
    assert sum(h.runs.values()) == 0
    assert (store.path.read_text() if store.path else world.extensions["outer_loops"]["ol_test"]) == text


def test_failed_manifest_write_keeps_the_old_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the rename fails the old manifest stays whole, no temporary file remains, the error is typed."""
    with durable.local_world(tmp_path) as world:
        run(Harness(accept_at=1).run(world))
        path = tmp_path / "outer-loops" / "ol_test.json"
        before = path.read_text()

        def broken(src: Any, dst: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("durable._outer_manifest.os.replace", broken)
        with pytest.raises(OuterLoopError, match="cannot write"):
            run(Harness().run(world, outer_loop_id="ol_test", description="now described"))
    assert path.read_text() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["ol_test.json"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"outer_loop_id": "../escape"}, "outer_loop_id"),
        ({"outer_loop_id": ""}, "outer_loop_id"),
        ({"max_cycles": 0}, "max_cycles"),
        ({"max_cycles": True}, "max_cycles"),
        ({"supervise": "yes"}, "supervise"),
        ({"description": 3}, "description"),
    ],
)
def test_bad_arguments_raise_configuration_error(
    world: durable.World, kwargs: dict[str, Any], match: str
) -> None:
    """Bad arguments raise ConfigurationError before anything is written."""
    with pytest.raises(durable.ConfigurationError, match=match):
        run(Harness().run(world, **kwargs))
    assert world.runs() == []


def test_plain_function_is_refused(world: durable.World) -> None:
    """run_outer_loop needs a @workflow."""

    async def plain(x: int) -> int:
        return x

    with pytest.raises(durable.ConfigurationError, match="@workflow"):
        run(durable.run_outer_loop(plain, 1, supervise=Done, max_cycles=1, outer_loop_id="x", world=world))


def test_bad_input_fails_before_a_manifest_exists(world: durable.World) -> None:
    """An input the workflow cannot take fails with invalid_input and writes no manifest."""
    h = Harness()
    with pytest.raises(RunFailedError) as info:
        run(
            durable.run_outer_loop(
                h.workflow,
                {"text": 3},
                supervise=h.supervise,
                max_cycles=2,
                outer_loop_id="ol_test",
                world=world,
            )
        )
    assert info.value.reason == "invalid_input"
    assert ManifestStore(world, "ol_test").load() is None


def test_supervise_returning_something_else_commits_nothing(worlds: Worlds) -> None:
    """An answer that is neither Done nor Continue fails; a later call asks again about that cycle."""
    h = Harness()
    with pytest.raises(durable.ConfigurationError, match="Done"):
        run(h.run(worlds.open(), supervise=lambda cycle: True))
    world = worlds.open()
    assert run(h.run(world)).final_output == FINAL
    assert len(world.runs()) == 3
    assert h.runs == expected_counts()


def test_invalid_next_input_commits_nothing(world: durable.World) -> None:
    """Continue with an input the workflow cannot take fails with invalid_input before the commit."""
    h = Harness()
    with pytest.raises(RunFailedError) as info:
        run(h.run(world, supervise=lambda cycle: Continue({"text": None})))
    pending = manifest_json(world)["pendingCycleRunId"]
    assert info.value.reason == "invalid_input"
    assert world.events(pending)[-1].type == "run.completed"


def test_failing_cycle_propagates_and_stays_pending(world: durable.World) -> None:
    """A cycle whose run fails raises its error and leaves that run pending in the manifest."""
    h = Harness()
    h.crash_in_polish, h.crash = 2, ValueError("polish broke")
    with pytest.raises(ValueError, match="polish broke"):
        run(h.run(world))
    m = manifest_json(world)
    assert (len(m["cycles"]), world.runs(status="failed")[0].run_id) == (1, m["pendingCycleRunId"])


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


def test_waiting_caller_honours_its_timeout(worlds: Worlds) -> None:
    """A caller that waits on a busy loop gives up at its own timeout; the first caller finishes."""
    h = Harness()

    async def scenario() -> durable.OuterLoopResult:
        gate = asyncio.Event()
        entered = asyncio.Event()

        async def slow_supervise(cycle: durable.Cycle) -> Done[Draft] | Continue[Draft]:
            entered.set()
            await gate.wait()
            return h.supervise(cycle)

        first = asyncio.create_task(h.run(worlds.open(), supervise=slow_supervise))
        await entered.wait()
        with pytest.raises(durable.RunTimeoutError, match="ol_test"):
            await h.run(worlds.open(), timeout=0)
        gate.set()
        return await first

    assert run(scenario()).final_output == FINAL
    assert h.runs == expected_counts()


def test_waiting_caller_can_be_cancelled(worlds: Worlds) -> None:
    """Cancelling a caller that waits on a busy loop leaves the driving caller undisturbed."""
    h = Harness()

    async def scenario() -> durable.OuterLoopResult:
        gate = asyncio.Event()
        entered = asyncio.Event()

        async def slow_supervise(cycle: durable.Cycle) -> Done[Draft] | Continue[Draft]:
            entered.set()
            await gate.wait()
            return h.supervise(cycle)

        first = asyncio.create_task(h.run(worlds.open(), supervise=slow_supervise))
        await entered.wait()
        waiter = asyncio.create_task(h.run(worlds.open()))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        gate.set()
        return await first

    assert run(scenario()).final_output == FINAL
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
