"""The replay decision table (``durable.engine._decide``), property by property (Hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine._decide import (
    EXECUTE,
    FAIL,
    RECONCILE,
    REDRIVE,
    REPLAY,
    RERUN,
    Call,
    check_position,
    decide_effect,
    decide_step,
    decide_value,
)
from durable.engine._keys import effect_key, step_path
from durable.engine._recorded import Recorded
from durable.engine._values import value_hash
from durable.errors import NondeterminismError, UnknownCommitError

names = st.sampled_from(["pay", "ask", "score"])
inputs = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none())
maybe = st.booleans()


def _step(name: str, inp: Any) -> Call:
    return Call("step", name, value_hash(inp), step_path("", name, 0, False))


def _index(call: Call, started: Any, completed: Any, failed: Any) -> Recorded:
    """A run's index holding these records (each ``None`` for nothing) at the call's path."""
    rec = Recorded()
    for index, record in (
        (rec.steps_started, started),
        (rec.steps_completed, completed),
        (rec.steps_failed, failed),
    ):
        if record is not None:
            index[call.key] = record
    return rec


def _decide(call: Call, inp: Any, started: Any, completed: Any, failed: Any) -> Any:
    """``decide_step``'s action for ``call`` over an index of these records."""
    action, _ = decide_step(
        _index(call, started, completed, failed), "r", call.name, call.input_hash, call.key, inp
    )
    return action


def _effect(kind: str, name: str, inp: Any) -> Call:
    return Call(kind, name, value_hash(inp), effect_key("", kind, name, 0))


@given(names, inputs, maybe, maybe, maybe)
def test_a_step_with_its_recorded_input_replays_fails_or_executes(
    name: str, inp: Any, has_start: bool, has_done: bool, has_failed: bool
) -> None:
    """Same input: a completion replays, else a final failure fails, else the step executes."""
    call = _step(name, inp)
    started = {"input_hash": call.input_hash} if has_start else None
    done = {"output": 1} if has_done else None
    failed = {"error_type": "x"} if has_failed else None
    action = _decide(call, inp, started, done, failed)
    assert action is (REPLAY if has_done else FAIL if has_failed else EXECUTE)


@given(names, inputs, inputs, maybe)
def test_a_step_with_another_recorded_input_is_nondeterminism(
    name: str, recorded: Any, attempted: Any, inherited: bool
) -> None:
    """Another input at a recorded path raises, unless a fork inherited it: then it reruns."""
    if value_hash(recorded) == value_hash(attempted):
        return
    call = _step(name, attempted)
    started: dict[str, Any] = {"input_hash": value_hash(recorded)}
    if inherited:
        started["inherited"] = True
        assert _decide(call, attempted, started, {"output": 1}, None) is RERUN
    else:
        with pytest.raises(NondeterminismError, match="arguments differ") as info:
            _decide(call, attempted, started, {"output": 1}, None)
        assert info.value.recorded["input_hash"] == value_hash(recorded)  # type: ignore[attr-defined]


@given(st.sampled_from(["tool", "model", "workflow"]), names, inputs, maybe, maybe, st.booleans())
def test_an_unconfirmed_effect_is_redriven_reconciled_or_refused(
    kind: str, name: str, inp: Any, idempotent: bool, reconcilable: bool, ok: bool
) -> None:
    """An intent without a receipt: re-driven when safe, reconciled when it can be, else refused."""
    call = _effect(kind, name, inp)
    intent = {"kind": kind, "name": name, "input_hash": call.input_hash}
    redrivable = kind != "tool" or idempotent
    if redrivable or reconcilable:
        action = decide_effect("r", call, inp, intent, None, redrivable=redrivable, reconcilable=reconcilable)
        assert action is (REDRIVE if redrivable else RECONCILE)
    else:
        with pytest.raises(UnknownCommitError, match="never confirmed"):
            decide_effect("r", call, inp, intent, None, redrivable=False, reconcilable=False)
    receipt = {"outcome": "ok" if ok else "error"}
    action = decide_effect("r", call, inp, intent, receipt, redrivable=redrivable, reconcilable=reconcilable)
    assert action is (REPLAY if ok else FAIL)
    assert decide_effect("r", call, inp, None, None, redrivable=False, reconcilable=False) is EXECUTE


@given(names, names, inputs, inputs)
def test_an_effect_recorded_under_another_name_or_input_is_nondeterminism(
    recorded_name: str, name: str, recorded: Any, attempted: Any
) -> None:
    """The effect at a key must be the recorded one: same name, same input hash."""
    call = _effect("tool", name, attempted)
    intent = {"kind": "tool", "name": recorded_name, "input_hash": value_hash(recorded)}
    same = recorded_name == name and value_hash(recorded) == value_hash(attempted)
    if same:
        assert (
            decide_effect("r", call, attempted, intent, None, redrivable=True, reconcilable=False) is REDRIVE
        )
    else:
        with pytest.raises(NondeterminismError):
            decide_effect(
                "r", call, attempted, intent, {"outcome": "ok"}, redrivable=True, reconcilable=False
            )


def test_a_fork_reruns_an_inherited_effect_whose_input_changed() -> None:
    """An inherited intent with another input is forgotten and executed, not refused."""
    call = _effect("tool", "pay", 2)
    intent = {"kind": "tool", "name": "pay", "input_hash": value_hash(1), "inherited": True}
    action = decide_effect("r", call, 2, intent, {"outcome": "ok"}, redrivable=False, reconcilable=False)
    assert action is RERUN


def test_a_format_one_input_hash_still_matches() -> None:
    """A hash of the ``json`` module's text (log format 1) is the same input."""
    from durable.engine._values import dumps, short_hash

    call = _step("pay", 1e-07)
    started = {"input_hash": short_hash(dumps(1e-07))}
    assert _decide(call, 1e-07, started, {"output": 1}, None) is REPLAY


@given(st.one_of(st.none(), st.just({"value": 1})))
def test_a_value_replays_exactly_when_it_is_recorded(recorded: dict[str, Any] | None) -> None:
    """Recorded values, sleeps, answers and sessions replay; nothing recorded executes."""
    assert decide_value(recorded) is (EXECUTE if recorded is None else REPLAY)


@given(
    st.sampled_from(["step", "tool", "now", "sleep"]),
    names,
    st.sampled_from(["step", "tool", "now", "sleep"]),
    names,
)
def test_a_position_holds_the_recorded_call_or_raises(rk: str, rn: str, ak: str, an: str) -> None:
    """The n-th call of a scope must be the recorded n-th call: same kind, name and key."""
    recorded = Call(rk, rn, "h", f"{rk}:{rn}#0")
    attempted = Call(ak, an, "other", f"{ak}:{an}#0")
    if (rk, rn) == (ak, an):
        check_position("r", "", 0, recorded, attempted)
    else:
        with pytest.raises(NondeterminismError, match="Restore the code"):
            check_position("r", "", 0, recorded, attempted)
    check_position("r", "", 0, None, attempted)


@given(names, inputs, maybe)
def test_a_step_decision_names_the_record_it_acts_on(name: str, inp: Any, has_done: bool) -> None:
    """``REPLAY`` comes with the recorded completion, ``FAIL`` with the final failure."""
    call = _step(name, inp)
    done = {"output": 1} if has_done else None
    failed = {"error_type": "x"}
    action, record = decide_step(
        _index(call, {"input_hash": call.input_hash}, done, failed),
        "r",
        call.name,
        call.input_hash,
        call.key,
        inp,
    )
    assert (action, record) == ((REPLAY, done) if has_done else (FAIL, failed))
