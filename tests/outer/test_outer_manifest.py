"""The outer-loop manifest model: round trips, the seed's format, and what counts as damaged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.errors import ConfigurationError
from durable.outer._manifest import (
    CycleEntry,
    Goal,
    LoopResult,
    OuterLoopManifest,
    _problem,
    check_outer_loop_id,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def manifests(draw: st.DrawFn) -> OuterLoopManifest:
    n = draw(st.integers(min_value=0, max_value=4))
    cycles = [
        CycleEntry(
            cycleNumber=i + 1,
            runId=f"run_{i}",
            output=draw(json_values),
            summary=draw(st.none() | st.text(max_size=10)),
        )
        for i in range(n)
    ]
    finished = draw(st.booleans())
    return OuterLoopManifest(
        outerLoopId="ol",
        goal=Goal(
            workflowDefinitionHash="sha256:" + "a" * 64, description=draw(st.none() | st.text(max_size=10))
        ),
        maxCycles=max(n, 1) + draw(st.integers(min_value=0, max_value=3)),
        inputHash=draw(st.none() | st.just("sha256:" + "b" * 64)),
        cycles=cycles,
        pendingCycleRunId=None if finished else draw(st.none() | st.just("run_next")),
        result=LoopResult(kind="done", finalOutput=draw(json_values)) if finished else None,
    )


@given(manifests())
def test_manifest_text_round_trips(m: OuterLoopManifest) -> None:
    """A manifest written as text reads back equal, and is consistent."""
    again = OuterLoopManifest.model_validate_json(m.text())
    assert again == m
    assert _problem(again, "ol") is None


@given(manifests())
def test_summary_key_is_written_only_when_there_is_one(m: OuterLoopManifest) -> None:
    """A cycle without a summary has no summary key in the file."""
    for entry, stored in zip(m.cycles, json.loads(m.text())["cycles"], strict=True):
        assert ("summary" in stored) == (entry.summary is not None)


def test_seed_format_with_extra_fields_loads_and_keeps_them() -> None:
    """A manifest in the seed's format, with workflowVersionId per cycle, loads and keeps unknown fields."""
    text = json.dumps(
        {
            "outerLoopId": "ol_1",
            "goal": {"workflowDefinitionHash": "sha256:x", "description": "d"},
            "maxCycles": 5,
            "inputHash": "sha256:y",
            "cycles": [
                {
                    "cycleNumber": 1,
                    "runId": "run_a",
                    "workflowVersionId": "wv_1",
                    "status": "completed",
                    "output": {},
                },
            ],
            "pendingCycleRunId": "run_b",
            "result": None,
        }
    )
    m = OuterLoopManifest.model_validate_json(text)
    assert (m.cycles[0].runId, m.pendingCycleRunId) == ("run_a", "run_b")
    assert json.loads(m.text())["cycles"][0]["workflowVersionId"] == "wv_1"


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"outerLoopId": "other"}, "belongs to outer loop 'other'"),
        ({"cycles": [{"cycleNumber": 1, "runId": "a"}, {"cycleNumber": 3, "runId": "b"}]}, "cycle numbers"),
        (
            {"maxCycles": 1, "cycles": [{"cycleNumber": 1, "runId": "a"}, {"cycleNumber": 2, "runId": "b"}]},
            "2 cycles",
        ),
        ({"pendingCycleRunId": "run_x", "result": {"kind": "done"}}, "both a result and a pending"),
    ],
)
def test_inconsistent_manifests_are_named(changes: dict[str, Any], problem: str) -> None:
    """Each inconsistency a well-formed manifest can have is found and described."""
    base: dict[str, Any] = {"outerLoopId": "ol", "goal": {"workflowDefinitionHash": "h"}, "maxCycles": 3}
    m = OuterLoopManifest.model_validate({**base, **changes})
    found = _problem(m, "ol")
    assert found is not None
    assert problem in found


@pytest.mark.parametrize("good", ["ol", "ol_2026-07-08", "a.b", "_x", "A" * 128])
def test_usable_outer_loop_ids_pass(good: str) -> None:
    """Ids made of letters, digits, '_', '-' and '.' pass unchanged."""
    assert check_outer_loop_id(good) == good


@pytest.mark.parametrize("bad", ["", ".hidden", "-x", "a/b", "../x", "a b", "A" * 129, 7, None])
def test_unusable_outer_loop_ids_are_refused(bad: Any) -> None:
    """Ids that cannot safely name a file raise ConfigurationError."""
    with pytest.raises(ConfigurationError, match="outer_loop_id"):
        check_outer_loop_id(bad)
