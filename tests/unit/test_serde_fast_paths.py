"""The shortcuts of the JSON layer give exactly what the slow path gives."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable import LogCorruptedError, SerializationError
from durable.engine._recorded import Recorded
from durable.engine._spec import Spec
from durable.engine._values import adapter, dumps, to_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON)
def test_dumps_matches_the_standard_encoder(value: Any) -> None:
    """The prebuilt encoder writes the same text as ``json.dumps`` with compact separators."""
    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_dumps_keeps_non_finite_floats_as_the_standard_encoder_does() -> None:
    """NaN and infinities come out as the standard encoder writes them."""
    assert dumps([math.inf, -math.inf]) == "[Infinity,-Infinity]"


def _returning(annotation: Any) -> Spec:
    """The ``Spec`` of a step whose return annotation is ``annotation``."""

    def f() -> None: ...

    f.__annotations__["return"] = annotation
    return Spec("step", f, "function")


@pytest.mark.parametrize(
    ("annotation", "value"),
    [(int, 3), (str, "x"), (bool, True), (Any, 3), (Any, "x"), (Any, None), (Any, False)],
)
def test_plain_values_round_trip_unchanged(annotation: Any, value: Any) -> None:
    """Plain JSON values of their own annotated type pass through both ways as pydantic would."""
    ad = adapter(annotation)
    dumped = to_json(ad, value, what="v", run_id="r", path="p")
    assert dumped == ad.dump_python(value, mode="json")
    assert _returning(annotation).rebuild(dumped) == ad.validate_python(dumped)


def test_mismatched_plain_values_still_fail() -> None:
    """A value of another type than the annotation still goes to pydantic and fails there."""
    with pytest.raises(SerializationError):
        to_json(adapter(int), "3", what="v", run_id="r", path="p")
    with pytest.raises(SerializationError):
        to_json(adapter(str), 3, what="v", run_id="r", path="p")


def test_subclasses_of_plain_types_are_validated() -> None:
    """``bool`` is an ``int`` subclass but not an ``int``: it takes pydantic's path."""
    rebuilt = _returning(int).rebuild(True)
    assert (rebuilt, type(rebuilt)) == (1, int)
    assert _returning(Any).rebuild([1]) == [1]


def test_rows_parse_in_one_pass() -> None:
    """A run's rows are indexed as if each had been parsed alone."""
    rows = [
        (1, "run.started", '{"workflow":"w","input_hash":"h"}'),
        (2, "step.started", '{"path":"s","visit":0,"attempt":1,"input_hash":"i","pos":0}'),
        (
            3,
            "step.completed",
            '{"path":"s","visit":0,"output":1,"output_hash":"o","state_version":1}',
        ),
    ]
    rec = Recorded.from_rows(rows)
    assert rec.started == {"workflow": "w", "input_hash": "h"}
    assert rec.steps_completed["s"]["output"] == 1
    assert rec.last_seq == 3


def test_a_bad_row_is_reported_as_bad() -> None:
    """A payload that is not one JSON value fails as it would when parsed alone, naming its row."""
    rows = [(1, "run.started", '{"workflow":"w"}'), (2, "step.started", '1,{"path":"s"}')]
    with pytest.raises(LogCorruptedError, match=r"event 2 \(step.started\)") as err:
        Recorded.from_rows(rows)
    assert isinstance(err.value.__cause__, json.JSONDecodeError)


def test_plain_arguments_are_stored_as_the_adapters_would_store_them() -> None:
    """A call of plain arguments (zipped in C) and one through the adapters give the same input and hash."""

    async def f(a: int, b: str, c: float | None = None) -> int:
        return a

    spec = Spec("step", f, "function")
    fast = spec.dump_input((1, "x", 2.5), {}, "r", "f")
    slow = spec.dump_input((1,), {"b": "x", "c": 2.5}, "r", "f")
    assert fast == slow
    assert fast[0] == {"a": 1, "b": "x", "c": 2.5}
    with pytest.raises(SerializationError, match="argument 'a'"):
        spec.dump_input(("not an int", "x", None), {}, "r", "f")


def test_a_lone_surrogate_in_a_plain_argument_is_refused_with_the_call_named() -> None:
    """A str that UTF-8 cannot encode fails before anything is buffered, naming the step's arguments."""

    async def f(s: str) -> str:
        return s

    with pytest.raises(SerializationError, match="the arguments of step 'f'"):
        Spec("step", f, "function").dump_input(("\ud800",), {}, "r", "f")
