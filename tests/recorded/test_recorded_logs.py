"""Recorded runs under ``tests/data/`` resumed with the current code (``drift_app``).

Each drifted log was written by a deliberately different version of the
code or configuration; resuming it must fail with the right error and
execute nothing. See ``tests/data/record_logs.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import durable
from durable import (
    ArtifactIntegrityError,
    CapabilityDriftError,
    LogFormatError,
    RunFailedError,
    World,
)
from tests import drift_app
from tests.conftest import Worlds
from tests.helpers.recorded import RUN_ID, load


@pytest.fixture(autouse=True)
def _fresh_counts() -> Iterator[None]:
    drift_app.CALLS.clear()
    drift_app.STOP_BEFORE_FINISH["on"] = False
    yield
    drift_app.CALLS.clear()


def _resume(world: World, models: dict[str, str] | None = None) -> drift_app.Summary:
    result: drift_app.Summary = asyncio.run(
        durable.run_workflow(
            drift_app.review,
            drift_app.INPUT,
            world=world,
            run_id=RUN_ID,
            models=models or drift_app.MODELS,
        )
    )
    return result


def _all_rows(world: World) -> list[list[tuple[int, str, str]]]:
    return [world.log.read(info.run_id) for info in world.runs()]


def test_clean_log_resumes_and_runs_only_the_unfinished_step(worlds: Worlds) -> None:
    """A log written by the current code resumes, running only the step that never finished."""
    world = load(worlds, "clean")
    summary = _resume(world)
    assert dict(drift_app.CALLS) == {"finish": 1}
    assert [r.id for r in summary.reviews] == ["ada", "grace"]
    assert summary.table_rows == 8


def test_clean_log_replays_a_large_step_output_from_its_artifact(worlds: Worlds) -> None:
    """The step output stored as an artifact is replayed from it, not recomputed."""
    world = load(worlds, "clean")
    events = world.events(RUN_ID)
    table = next(e for e in events if e.type == "step.completed" and e.path == "table")
    assert table.output is None
    assert table.artifact is not None
    summary = _resume(world)
    assert summary.table_rows == 8
    assert drift_app.CALLS["table"] == 0


DRIFTS = {
    "signature": {
        "tools.score.signature": (
            "(candidate_id: str) -> int",
            "(candidate_id: str, strict: bool = False) -> int",
        )
    },
    "option": {"tools.score.options.idempotent": (False, True)},
    "model_slot": {"model_calls.ask.options.slot": ("planner", "worker")},
    "models": {"models.worker": ("gpt-4o-mini", "gpt-5")},
}


@pytest.mark.parametrize("case", sorted(DRIFTS))
def test_drifted_log_fails_with_each_change_and_executes_nothing(worlds: Worlds, case: str) -> None:
    """A log written by other code or models fails with exactly its changes, before any call."""
    world = load(worlds, case)
    before = _all_rows(world)
    with pytest.raises(CapabilityDriftError) as info:
        _resume(world)
    assert {c.key: (c.old, c.new) for c in info.value.changes} == DRIFTS[case]
    assert sum(drift_app.CALLS.values()) == 0
    assert _all_rows(world) == before


def test_child_workflow_change_is_reported_by_its_definition_hash(worlds: Worlds) -> None:
    """A changed child workflow shows as ``workflows.scoring.definition_hash``, and nothing runs."""
    world = load(worlds, "child_workflow")
    with pytest.raises(CapabilityDriftError) as info:
        _resume(world)
    [change] = info.value.changes
    assert change.key == "workflows.scoring.definition_hash"
    assert change.old.startswith("sha256:")
    assert change.new.startswith("sha256:")
    assert change.old != change.new
    assert sum(drift_app.CALLS.values()) == 0


def test_output_schema_change_is_drift(worlds: Worlds) -> None:
    """A changed workflow return schema is drift, reported with the output schema hash."""
    world = load(worlds, "output_schema")
    with pytest.raises(CapabilityDriftError) as info:
        _resume(world)
    keys = [c.key for c in info.value.changes]
    assert "workflow.output_schema_hash" in keys
    assert "workflow.returns.properties.comment" in keys
    assert all(k.startswith("workflow.") for k in keys)
    assert sum(drift_app.CALLS.values()) == 0


def test_input_change_fails_with_run_input_mismatch(worlds: Worlds) -> None:
    """A resume with another input fails as ``runtime_config_error``/``run_input_mismatch``."""
    world = load(worlds, "input")
    before = _all_rows(world)
    with pytest.raises(RunFailedError) as info:
        _resume(world)
    assert (info.value.cause_code, info.value.reason) == ("runtime_config_error", "run_input_mismatch")
    assert sum(drift_app.CALLS.values()) == 0
    assert _all_rows(world) == before


def test_tampered_artifact_fails_naming_it_and_both_hashes(worlds: Worlds) -> None:
    """A changed artifact payload fails the resume, naming the artifact and both hashes."""
    world = load(worlds, "tampered_artifact")
    with pytest.raises(ArtifactIntegrityError) as info:
        _resume(world)
    err = info.value
    assert err.artifact == "report.md"
    assert err.expected is not None
    assert err.actual is not None
    assert err.expected != err.actual
    assert err.expected in str(err)
    assert err.actual in str(err)
    assert sum(drift_app.CALLS.values()) == 0


def test_missing_artifact_fails_naming_it(worlds: Worlds) -> None:
    """A missing artifact payload fails the resume, naming the artifact and the recorded hash."""
    world = load(worlds, "missing_artifact")
    with pytest.raises(ArtifactIntegrityError) as info:
        _resume(world)
    err = info.value
    assert err.artifact == "table"
    assert err.actual is None
    assert err.expected is not None
    assert err.expected in str(err)
    assert "(missing)" in str(err)
    assert sum(drift_app.CALLS.values()) == 0


def test_log_from_a_newer_format_fails_naming_the_version(worlds: Worlds) -> None:
    """A log written with a newer log format is refused with a message naming that format."""
    world = load(worlds, "newer_format")
    with pytest.raises(LogFormatError, match="log format 99"):
        _resume(world)
    assert sum(drift_app.CALLS.values()) == 0


def test_drift_message_has_the_documented_format(worlds: Worlds) -> None:
    """The drift message names the run, lists ``key: old → new`` and ends with the three ways out."""
    world = load(worlds, "signature")
    with pytest.raises(CapabilityDriftError) as info:
        _resume(world)
    assert str(info.value) == (
        "Run 'run_recorded' was started with a different code or configuration.\n"
        "\n"
        "Changes detected:\n"
        '- tools.score.signature: "(candidate_id: str) -> int" → '
        '"(candidate_id: str, strict: bool = False) -> int"\n'
        "\n"
        "To resume cleanly, restore the prior code or configuration and resume.\n"
        "To start fresh, run with a new run_id.\n"
        "To keep this run going with the change (it is deliberate, for example an option an "
        'error told you to set), resume with run_workflow(..., accept_drift=["tools.score.signature"]).'
    )
    assert info.value.run_id == RUN_ID


def test_drifted_log_resumes_after_the_configuration_is_restored(worlds: Worlds) -> None:
    """Restoring the recorded model mapping (the first way out) lets the drifted run resume."""
    world = load(worlds, "models")
    with pytest.raises(CapabilityDriftError):
        _resume(world)
    summary = _resume(world, models={"worker": "gpt-4o-mini"})
    assert summary.table_rows == 8
    assert dict(drift_app.CALLS) == {"finish": 1}
