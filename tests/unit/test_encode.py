"""Every event is written through one builder per type, under its model's field names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable.engine import _event_writer as ev
from durable.events import EVENT_TYPES, parse_event

ERROR = {"error_type": "builtins.ValueError", "error_message": "boom", "error_args": ["boom"]}

PAYLOADS: dict[str, Any] = {
    "run.started": ev.run_started(
        "wf", {"a": 1}, "h", {"m": 1}, "sha256:x", {"s": "m"}, "o", 2, parent=("p", "k"), deadline_at=9.5
    ),
    "step.started": ev.step_started("a.b", 0, 1, "h", 3, {"input": {"x": 1}}),
    "step.completed": ev.step_completed("a.b", 0, b'{"x":[1,2]}', "h", 4, None),
    "step.failed": ev.step_failed("a.b", 0, 2, ERROR, True),
    "effect.intent": ev.effect_intent(
        "tool:pay#0",
        "workflow",
        "pay",
        "h",
        0,
        "r:tool:pay#0",
        {"input_ref": {"artifact": {"sha256": "sha256:00"}}},
    ),
    "effect.receipt": ev.receipt_error("tool:pay#0", ERROR),
    "value.recorded": ev.value_recorded("now#1", "now", 1.5, 1),
    "patch.marked": ev.patch_marked("a.patched[use-c]#0", "use-c"),
    "retry.decision": ev.retry_decision("a", 1, True, 0.5, 10.0, "builtins.ValueError", 9.0),
    "session.started": ev.session_started("session:w#0", "w", {"role": "w"}, "sha256:y", 2),
    "session.completed": ev.session_completed("session:w#0", "w", "sha256:y"),
    "interrupt": ev.interrupt("interrupt#2", {"ask": 1}, 2),
    "interrupt.resumed": ev.interrupt_resumed("interrupt#2", "yes"),
    "stream.cursor": ev.stream_cursor("model:ask#0", 2, True, ["a", "b"]),
    "timer.set": ev.timer_set("sleep#0", 12.5, 0),
    "message.waiting": ev.message_waiting("recv#0", "chat", 12.5, 0),
    "message.received": ev.message_received("recv#0", None, "m1", {"text": "hi"}, False, 0),
    "message.sent": ev.message_sent("send#1", "other", "chat", "r:send#1", 1),
    "event.set": ev.event_set("set_event#2", "progress", 0.5, 2),
    "stream.write": ev.stream_write("model:ask#0~3", "tokens", "he", None),
    "stream.closed": ev.stream_closed("close_stream#4", "tokens", 4),
    "fanout.started": ev.fanout_started("fanout#0", "review", ["c1", "c2"]),
    "drift.accepted": ev.drift_accepted(
        [{"key": "tools.pay.options.idempotent", "old": False, "new": True}],
        {"tools": {}},
        "sha256:m",
        output_schema_hash="o",
        session="session:w#0",
    ),
    "snapshot": ev.snapshot({"encoding": "x", "data": ""}, "sha256:z", 9),
    "run.restored": ev.run_restored(3, 7),
    "run.retried": ev.run_retried(["a.b"]),
    "outer_loop.cycle_completed": ev.cycle_completed("loop", 1, 5, "continue", 6, None, "more"),
    "run.completed": ev.run_completed(5, "h"),
    "run.failed": ev.run_failed(ERROR, "a.b"),
    "run.interrupted": ev.run_interrupted("interrupt#2", {"ask": 1}),
    "run.cancelled": ev.run_cancelled("deadline"),
    "run.resumed": ev.run_resumed("requested"),
    "run.resolved": ev.run_resolved("happened", "ada@host", 1.5, key="tool:pay#0", result={"id": 7}),
    "budget.set": ev.budget_set(
        {"max_model_calls": 5, "max_tokens": None, "max_cost": 1.5, "prices": {"m": [1.0, 2.0]}}, "ada@host"
    ),
}


def test_every_event_type_has_a_builder() -> None:
    """The builders cover exactly the event types of the schema."""
    assert sorted(PAYLOADS) == sorted(EVENT_TYPES)


@pytest.mark.parametrize("type_", sorted(PAYLOADS))
def test_a_builders_payload_is_valid_under_its_model(type_: str) -> None:
    """Each payload parses as its model, which forbids unknown fields, and keeps every field."""
    text = ev.text(PAYLOADS[type_])
    event = parse_event("r", 1, type_, text)
    assert event.type == type_
    dumped = event.model_dump(mode="json")
    for field, value in json.loads(text).items():
        assert dumped[field] == value


def test_a_step_output_is_spliced_in_as_encoded() -> None:
    """The output's bytes, encoded once for the hash, stand unchanged in the event."""
    raw = b'{"b":1,"a":[1.5,"\\u00e9"]}'
    folded = ev.step_completed_folded(ev.step_started("s", 0, 1, "h", 0, {"input": {}}), raw, "oh", 1, None)
    assert raw.decode() in folded
    assert json.loads(folded)["output"] == {"b": 1, "a": [1.5, "é"]}
    assert json.loads(folded)["input_hash"] == "h"


def test_an_output_offloaded_to_an_artifact_is_null_in_the_event() -> None:
    """With an artifact reference the event's output is null, not the large bytes."""
    text = ev.step_completed("s", 0, b'"large"', "oh", 1, {"sha256": "x"})
    assert json.loads(text)["output"] is None
    assert json.loads(text)["artifact"] == {"sha256": "x"}


def test_no_module_writes_an_event_payload_by_hand() -> None:
    """Every ``emit``/``record`` call in the package passes a builder's payload, never a literal dict."""
    import ast
    from pathlib import Path

    import durable

    offenders = []
    for path in Path(durable.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("emit", "record", "emit_encoded")
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Dict | ast.DictComp)
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
