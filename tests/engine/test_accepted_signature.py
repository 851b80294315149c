"""An accepted signature drift of a used capability: its recorded calls replay, or durable says why not."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

import durable
from durable import CapabilityDriftError, NondeterminismError
from tests.conftest import Worlds
from tests.helpers.codegen import load_source

SOURCE = """
import durable

SHIPPED = []


@durable.tool
async def ship({params}) -> str:
    SHIPPED.append(1)
    return "shipped"


@durable.step
async def pack({pack_params}) -> str:
    return "packed"


@durable.workflow
async def order(n: int) -> str:
    packed = await pack({pack_call})
    shipped = await ship({call})
    answer = durable.interrupt("deliver?")
    return f"{{packed}} {{shipped}} {{answer}}"
"""

OLD = {"params": "order_id: str", "call": '"A-1"', "pack_params": "box: str", "pack_call": '"small"'}


def _code(monkeypatch: pytest.MonkeyPatch, **changes: str) -> types.ModuleType:
    return load_source(monkeypatch, "shipping_app", SOURCE.format(**{**OLD, **changes}))


def _waiting_run(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of the old code that called ``pack`` and ``ship`` and waits for an answer."""
    old = _code(monkeypatch)
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(old.order, 1, world=worlds.open(), run_id="r"))
    assert old.SHIPPED == [1]


def _resume(mod: types.ModuleType, worlds: Worlds, **kwargs: Any) -> Any:
    return asyncio.run(
        durable.run_workflow(mod.order, 1, world=worlds.open(), run_id="r", resume="yes", **kwargs)
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"params": "order_id: str, priority: int = 0"},  # a parameter with a default added
        {"params": "oid: str"},  # a parameter renamed, passed positionally
        {"params": "oid: str", "call": 'oid="A-1"'},  # renamed, and the call site follows it
        {"params": "order_id: str, *, express: bool = False"},  # a keyword-only one added
        {"pack_params": "size: str"},  # a step's parameter renamed: drift, accepted the same way
    ],
)
def test_an_accepted_signature_drift_replays_the_recorded_call(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, changes: dict[str, str]
) -> None:
    """Accepting the key the drift error names resumes the run; the recorded call is not made again."""
    _waiting_run(worlds, monkeypatch)
    new = _code(monkeypatch, **changes)
    with pytest.raises(CapabilityDriftError) as info:
        _resume(new, worlds)
    keys = [c.key for c in info.value.changes]
    assert len(keys) == 1 and keys[0].endswith(".signature")
    assert "accept_drift=[" in str(info.value)  # advised, because it helps
    assert _resume(new, worlds, accept_drift=keys) == "packed shipped yes"
    assert new.SHIPPED == []  # the recorded call replayed: the tool did not run again
    assert _resume(new, worlds) == "packed shipped yes"  # and a later resume replays without accepting


def test_a_dry_resume_of_the_accepted_run_replays_under_the_new_code(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once accepted, dry_resume and replay_file of the run agree with the resume: every call replays."""
    _waiting_run(worlds, monkeypatch)
    new = _code(monkeypatch, params="oid: str")
    _resume(new, worlds, accept_drift=["tools.ship.signature"])
    got = asyncio.run(durable.dry_resume(new.order, "r", world=worlds.open()))
    assert got.ok and got.error is None, got.detail()


@pytest.mark.parametrize(
    ("params", "call", "why"),
    [
        ("order_id: str, priority: int", '"A-1", 2', "'priority'"),  # a new parameter without a default
        ("first: str, second: str", '"A-1", "x"', "'second'"),  # renamed, and one more without a default
    ],
)
def test_a_drift_whose_recorded_calls_cannot_bind_says_accepting_will_not_help(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, params: str, call: str, why: str
) -> None:
    """The error, dry_resume and an acceptance made anyway name the signature; nothing is taken over."""
    _waiting_run(worlds, monkeypatch)
    new = _code(monkeypatch, params=params, call=call)
    with pytest.raises(CapabilityDriftError) as info:
        _resume(new, worlds)
    said = str(info.value)
    assert "would not help" in said and why in said and 'accept_drift=["' not in said
    dry = asyncio.run(durable.dry_resume(new.order, "r", world=worlds.open()))
    assert not dry.ok and list(dry.blockers) == ["tools.ship.signature"]
    assert why in dry.detail() and "would not help" in dry.detail()
    with pytest.raises(CapabilityDriftError) as accepted_anyway:
        _resume(new, worlds, accept_drift=["tools.ship.signature"])
    said = str(accepted_anyway.value)
    assert "would not help" in said and why in said
    assert "clock" not in said
    assert new.SHIPPED == []
    # Refused before any write: the run stays the old code's, which still replays and finishes it.
    old = _code(monkeypatch)
    assert _resume(old, worlds) == "packed shipped yes"
    assert old.SHIPPED == []


def test_a_new_parameter_passed_off_its_default_is_another_call_and_says_so(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded call binds, but the code now passes another value: the error says exactly that."""
    _waiting_run(worlds, monkeypatch)
    new = _code(monkeypatch, params="order_id: str, priority: int = 0", call='"A-1", 2')
    with pytest.raises(NondeterminismError) as info:
        _resume(new, worlds, accept_drift=["tools.ship.signature"])
    said = str(info.value)
    assert "signature of tool 'ship' changed" in said and "other values" in said
    assert new.SHIPPED == []
