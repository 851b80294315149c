"""Compatible changes: a parameter with a default added to a used step binds every recorded call."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durable
from durable import CapabilityDriftError, NondeterminismError, World
from durable.cli import main
from durable.engine._compatible import Rebinding, added_parameters, rebinding
from tests.conftest import Worlds
from tests.helpers.codegen import load_source

SOURCE = """
import durable

STOP = {{"on": True}}
CALLS = []


class Crash(BaseException):
    pass


@durable.step
async def fetch(x: int{fetch_extra}) -> int:
    CALLS.append("fetch")
    return x + 1


@durable.tool(idempotent=True)
async def send(x: int{send_extra}) -> int:
    CALLS.append("send")
    return x * 10


@durable.step
async def halt() -> int:
    CALLS.append("halt")
    if STOP["on"]:
        raise Crash()
    return 0


@durable.workflow
async def flow(n: int) -> int:
    v = await send(await fetch({fetch_call}))
    await halt()
    return v
"""

DEFAULTS = {"fetch_extra": "", "send_extra": "", "fetch_call": "n"}


def _code(monkeypatch: pytest.MonkeyPatch, stop: bool = True, **changes: str) -> types.ModuleType:
    mod = load_source(monkeypatch, "compat_flow", SOURCE.format(**{**DEFAULTS, **changes}))
    mod.STOP["on"] = stop
    return mod


def _run(mod: types.ModuleType, world: World, run_id: str = "r1") -> Any:
    return asyncio.run(durable.run_workflow(mod.flow, 1, world=world, run_id=run_id))


def _crashed_run(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _code(monkeypatch)
    with pytest.raises(mod.Crash):
        _run(mod, worlds.open())


@pytest.mark.parametrize(
    ("old", "new", "added"),
    [
        ("(x: int) -> int", "(x: int, strict: bool = False) -> int", ("strict",)),
        ("(x: int) -> int", "(x: int, *, strict: bool = False, n: int = 3) -> int", ("strict", "n")),
        ("(x: int, *, a: int = 1) -> int", "(x: int, *, b: str = 'b', a: int = 1) -> int", ("b",)),
        ("(*args: int) -> int", "(*args: int, strict: bool = False) -> int", ("strict",)),
        ("(x: int) -> int", "(x: int) -> int", ()),
    ],
)
def test_parameters_with_defaults_added_after_the_others_are_compatible(
    old: str, new: str, added: tuple[str, ...]
) -> None:
    """Every call of the old signature binds to the new one, the new parameters at their defaults."""
    assert added_parameters(old, new) == added


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("(x: int) -> int", "(x: int, strict: bool) -> int"),  # no default: old calls do not bind
        ("(x: int) -> int", "(strict: bool = False, x: int = 0) -> int"),  # shifts positional calls
        ("(x: int) -> int", "(x: int, /, strict: bool = False) -> int"),  # x became positional-only
        ("(x: int) -> int", "(x: str, strict: bool = False) -> int"),  # an old parameter changed
        ("(x: int) -> int", "(x: int, strict: bool = False) -> str"),  # the return type changed
        ("(x: int, y: int = 1) -> int", "(x: int, y: int = 2) -> int"),  # a default changed
        ("(x: int, y: int) -> int", "(x: int) -> int"),  # a parameter removed
        ("(x: int) -> int", "(x: int, *rest: int) -> int"),  # a catch-all changes what binds
        ("(*args: int) -> int", "(*args: int, y: int = 1, **kw: int) -> int"),
        ("(x: int) -> int", "(x: int, strict: bool = <object>) -> int"),  # an unreadable default
    ],
)
def test_other_signature_changes_are_not_compatible(old: str, new: str) -> None:
    """A change that some recorded call might not bind to, or bind differently, is drift."""
    assert added_parameters(old, new) is None


def test_a_step_that_gained_a_parameter_with_a_default_resumes(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded call of the step replays (its body does not run again) and the run completes."""
    _crashed_run(worlds, monkeypatch)
    mod = _code(monkeypatch, stop=False, fetch_extra=", strict: bool = False")
    assert _run(mod, worlds.open()) == 20
    assert mod.CALLS == ["halt"]
    assert _run(mod, worlds.open()) == 20  # and again, once completed


def test_a_call_passing_the_new_parameter_otherwise_is_a_new_input(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new parameter at another value than its default is not the recorded call: NondeterminismError."""
    _crashed_run(worlds, monkeypatch)
    mod = _code(monkeypatch, stop=False, fetch_extra=", strict: bool = False", fetch_call="n, strict=True")
    with pytest.raises(NondeterminismError):
        _run(mod, worlds.open())
    assert mod.CALLS == []


def test_a_tool_that_gained_a_parameter_is_still_drift(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's signature is its contract with the outside: any change of it is drift."""
    _crashed_run(worlds, monkeypatch)
    mod = _code(monkeypatch, stop=False, send_extra=", strict: bool = False")
    with pytest.raises(CapabilityDriftError) as info:
        _run(mod, worlds.open())
    assert [c.key for c in info.value.changes] == ["tools.send.signature"]


def _verify_all(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["verify", "--all", "--data-dir", str(tmp_path / "d"), "--workflow", "compat_flow:flow"])
    return code, capsys.readouterr().out


def test_verify_reports_only_what_would_fail_a_resume(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A completed run is not drift, a compatible step change is not drift, a changed tool is."""
    mod = _code(monkeypatch, stop=False)
    with durable.local_world(tmp_path / "d") as world:
        assert _run(mod, world, "done") == 20
        mod.STOP["on"] = True
        with pytest.raises(mod.Crash):
            _run(mod, world, "crashed")
    compatible = _code(monkeypatch, stop=False, fetch_extra=", strict: bool = False")
    code, out = _verify_all(tmp_path, capsys)
    assert code == 0, out
    assert "1 completed run(s)" in out  # says why the finished run's drift was not checked
    _code(monkeypatch, stop=False, send_extra=", strict: bool = False")
    code, out = _verify_all(tmp_path, capsys)
    assert code == 1
    assert "run crashed:" in out and "tools.send.signature" in out and "run done:" not in out
    with durable.local_world(tmp_path / "d") as world:  # what verify passed resumes
        assert _run(compatible, world, "crashed") == 20
        assert _run(compatible, world, "done") == 20


@pytest.mark.parametrize(
    ("old", "new", "names", "added"),
    [
        ("(x: int) -> int", "(x: int, strict: bool = False) -> int", {"x": "x"}, ("strict",)),
        ("(order_id: str) -> str", "(oid: str) -> str", {"order_id": "oid"}, ()),
        (
            "(a: int, *, k: int = 1) -> int",
            "(b: int, *, j: int = 2, k: int = 1) -> int",
            {"a": "b", "k": "k"},
            ("j",),
        ),
        ("(a: int, b: int) -> int", "(a: int, *, b: int) -> int", {"a": "a", "b": "b"}, ()),
        ("(*args: int) -> int", "(*items: int, **kw: int) -> int", {"args": "items"}, ("kw",)),
    ],
)
def test_a_recorded_call_binds_to_a_changed_signature_by_position_then_by_name(
    old: str, new: str, names: dict[str, str], added: tuple[str, ...]
) -> None:
    """Positional parameters keep their place (a rename keeps the value); the rest bind by name."""
    got = rebinding(old, new)
    assert isinstance(got, Rebinding)
    assert got.names == names and got.added == added


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("(x: int) -> int", "(x: int, strict: bool) -> int", "'strict'"),  # no default: no value recorded
        ("(x: int, y: int) -> int", "(x: int) -> int", "'y'"),  # a recorded value with no place
        ("(*args: int) -> int", "(x: int = 0) -> int", "*args"),
        ("(x: int) -> int", "(x: int = <object>) -> int", "not Python"),
    ],
)
def test_a_recorded_call_that_cannot_bind_says_which_parameter(old: str, new: str, named: str) -> None:
    """The reason names the parameter (or the unreadable text) that keeps the call from binding."""
    got = rebinding(old, new)
    assert isinstance(got, str) and named in got


@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=5, unique=True), st.data())
def test_renaming_positional_parameters_keeps_every_value_in_its_place(names: list[str], data: Any) -> None:
    """Whatever the new names, each recorded parameter binds to the one at its position."""
    renamed = data.draw(st.permutations([f"{n}2" for n in names]))
    old = "(" + ", ".join(f"{n}: int" for n in names) + ") -> int"
    new = "(" + ", ".join(f"{n}: int" for n in renamed) + ") -> int"
    got = rebinding(old, new)
    assert isinstance(got, Rebinding)
    assert got.order == tuple(names) and got.names == dict(zip(names, renamed, strict=True))
    assert got.added == ()
