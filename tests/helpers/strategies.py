"""Shared Hypothesis strategies: random (well-formed) event sequences of one run."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from durable.engine._keys import value_key

PATHS = ["a", "b", "loop.visit[0]", "loop.visit[1]", "par[x].c", "par[y].c"]
KEYS = ["tool:pay#0", "model:ask#1", "par[x].tool:pay#0"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _op(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(
        st.sampled_from(
            [
                "step.started",
                "step.completed",
                "step.completed",
                "step.failed",
                "effect.intent",
                "effect.receipt",
                "value.recorded",
                "patch.marked",
                "timer.set",
                "interrupt",
                "interrupt.resumed",
                "session.started",
                "retry.decision",
                "stream.cursor",
                "run.retried",
                "run.completed",
                "run.failed",
                "run.interrupted",
                "outer_loop.cycle_completed",
                "run.restored",
            ]
        )
    )
    path = draw(st.sampled_from(PATHS))
    key = draw(st.sampled_from(KEYS))
    value = draw(json_values)
    data: dict[str, Any]
    if kind == "step.started":
        data = {"path": path, "visit": 0, "attempt": 1, "input_hash": draw(st.sampled_from("xy")), "pos": 0}
    elif kind == "step.completed":
        data = {"path": path, "visit": 0, "output": value, "output_hash": "h", "state_version": 0}
        if draw(st.booleans()):  # the start folded into the completion (log format 2)
            data |= {"attempt": 1, "input_hash": draw(st.sampled_from("xy")), "pos": 0}
    elif kind == "step.failed":
        data = {"path": path, "error_type": "E", "error_message": "m", "final": draw(st.booleans())}
    elif kind == "effect.intent":
        data = {"key": key, "kind": "tool", "name": "pay", "input_hash": "x", "pos": 0}
    elif kind == "effect.receipt":
        outcome = draw(st.sampled_from(["ok", "error"]))
        data = {"key": key, "outcome": outcome, "result": value}
    elif kind == "value.recorded":
        data = {"key": value_key("", "now", draw(st.integers(0, 3))), "kind": "now", "value": value, "pos": 0}
    elif kind == "patch.marked":
        data = {"key": f"patched[c]#{draw(st.integers(0, 3))}", "change_id": "c"}
    elif kind == "timer.set":
        data = {"path": value_key("", "sleep", draw(st.integers(0, 3))), "wake_at": 1.5, "pos": 0}
    elif kind in ("interrupt", "interrupt.resumed", "run.interrupted"):
        data = {"path": value_key("", "interrupt", draw(st.integers(0, 2))), "value": value}
    elif kind == "session.started":
        data = {"path": path, "role": "r", "manifest": {}, "manifest_hash": "m"}
    elif kind == "retry.decision":
        data = {"key": key, "attempt": 1, "decision": "retry", "backoff": 0.0}
    elif kind == "stream.cursor":
        data = {"key": key, "chunks": 1, "terminal": draw(st.booleans()), "data": [value]}
    elif kind == "run.retried":
        data = {"paths": draw(st.lists(st.sampled_from(PATHS + KEYS), max_size=3))}
    elif kind == "run.completed":
        data = {"output": value, "output_hash": "h"}
    elif kind == "run.failed":
        data = {"error_type": "E", "error_message": "m", "path": None}
    elif kind == "outer_loop.cycle_completed":
        data = {"outer_loop_id": "o", "cycle": 0, "output": value, "decision": "done"}
    else:  # run.restored: the target is chosen when the log is built
        data = {"target": draw(st.integers(0, 1000))}
    return kind, data


STARTED = {"workflow": "wf", "input": None, "input_hash": "sha256:0", "format_version": 2}


@st.composite
def event_programs(draw: st.DrawFn) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """Events after ``run.started``, and the position at which to compact (0 = right after it)."""
    ops = [("run.started", dict(STARTED)), *draw(st.lists(_op(), max_size=40))]
    return ops, draw(st.integers(1, len(ops)))
