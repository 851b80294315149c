"""Outer loops refuse what does not match: workflow, max_cycles, input, damaged manifests, bad arguments."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

import durable
from durable import Continue, Done, OuterLoopError, RunFailedError
from durable.engine._manifest import definition_hash
from durable.engine._spec import spec_of
from durable.outer._manifest import ManifestStore
from tests.conftest import Worlds
from tests.helpers.outer_loop_harness import (
    FINAL,
    MAX_CYCLES,
    Draft,
    Harness,
    crash_after_cycle_1,
    expected_counts,
    manifest_json,
    run,
    write_manifest_text,
)

# -- refusing a resume that does not match --------------------------------------------


def _loop(worlds: Worlds, monkeypatch: pytest.MonkeyPatch, finished: bool) -> Harness:
    """A loop to resume with something changed: finished, or killed after its first cycle."""
    if not finished:
        return crash_after_cycle_1(worlds, monkeypatch)
    h = Harness()
    run(h.run(worlds.open()))
    return h


@pytest.mark.parametrize("finished", [False, True])
def test_resume_with_another_workflow_fails_closed(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, finished: bool
) -> None:
    """Another workflow definition is outer_loop_goal_mismatch, before any cycle runs or a result returns."""
    _loop(worlds, monkeypatch, finished)
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
    h = _loop(worlds, monkeypatch, finished)
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
    h = _loop(worlds, monkeypatch, finished)
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
    assert (store.path.read_text() if store.path else (world.outer_loop_manifests or {})["ol_test"]) == text


def test_failed_manifest_write_keeps_the_old_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the rename fails the old manifest stays whole, no temporary file remains, the error is typed."""
    with durable.local_world(tmp_path) as world:
        run(Harness(accept_at=1).run(world))
        path = tmp_path / "outer-loops" / "ol_test.json"
        before = path.read_text()

        def broken(src: Any, dst: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("durable.security._confined.os.replace", broken)
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
