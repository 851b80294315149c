"""Drift on resume: which changes fail closed and which may happen freely (both backends)."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

import durable
from durable import CapabilityDriftError, World
from tests.conftest import Worlds
from tests.helpers.codegen import load_source

SOURCE = """
import durable

STOP = {{"on": True}}
CALLS = []


class Crash(BaseException):
    pass


@durable.tool
async def rare(x: int{rare_extra}) -> int:
    CALLS.append("rare")
    return x


@durable.tool{common_opts}
async def common(x: int{common_extra}) -> int:
    CALLS.append("{common_body}")
    return x + 1


@durable.tool
async def extra(x: int) -> int:
    return x


@durable.step
async def halt() -> int:
    CALLS.append("halt")
    if STOP["on"]:
        raise Crash()
    return 0


@durable.workflow{flow_opts}
async def flow(n: int) -> int:
    v = await common(n)
    await halt()
    if n < 0:
        v = await rare(v)
    return v
"""

DEFAULTS = {"rare_extra": "", "common_opts": "", "common_extra": "", "common_body": "common", "flow_opts": ""}


def _code(monkeypatch: pytest.MonkeyPatch, **changes: str) -> types.ModuleType:
    return load_source(monkeypatch, "drift_flow", SOURCE.format(**{**DEFAULTS, **changes}))


def _run(mod: types.ModuleType, world: World, models: dict[str, str] | None = None) -> Any:
    return asyncio.run(durable.run_workflow(mod.flow, 1, world=world, run_id="r1", models=models))


def _crashed_run(worlds: Worlds, monkeypatch: pytest.MonkeyPatch, **changes: str) -> None:
    mod = _code(monkeypatch, **changes)
    with pytest.raises(mod.Crash):
        _run(mod, worlds.open())


def _deploy(monkeypatch: pytest.MonkeyPatch, **changes: str) -> types.ModuleType:
    mod = _code(monkeypatch, **changes)
    mod.STOP["on"] = False
    return mod


def _drift_keys(mod: types.ModuleType, world: World, models: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(CapabilityDriftError) as info:
        _run(mod, world, models)
    assert mod.CALLS == []
    return [c.key for c in info.value.changes]


def test_unchanged_code_resumes(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same code resumes and runs only what did not finish."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch)
    assert _run(mod, worlds.open()) == 2
    assert mod.CALLS == ["halt"]


def test_unused_undeclared_capability_may_change(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool the log never used and the workflow does not declare may change freely."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, rare_extra=", strict: bool = True")
    assert _run(mod, worlds.open()) == 2


def test_used_capability_change_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed signature of a tool the log used fails the resume before anything runs."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, common_extra=", strict: bool = True")
    assert _drift_keys(mod, worlds.open()) == ["tools.common.signature"]


def test_declared_unused_capability_change_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool declared with ``uses=`` is compared even when the log never used it."""
    _crashed_run(worlds, monkeypatch, flow_opts="(uses=[rare])")
    mod = _deploy(monkeypatch, flow_opts="(uses=[rare])", rare_extra=", strict: bool = True")
    assert _drift_keys(mod, worlds.open()) == ["tools.rare.signature"]


def test_new_declaration_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """Declaring a capability the run neither declared nor reached shows as ``(none) → description``."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, flow_opts="(uses=[extra])")
    with pytest.raises(CapabilityDriftError) as info:
        _run(mod, worlds.open())
    [change] = info.value.changes
    assert (change.key, change.old) == ("tools.extra", None)
    assert change.new["signature"] == "(x: int) -> int"
    assert "- tools.extra: (none) → {" in str(info.value)


def test_used_capability_gone_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A used tool that the code no longer has under its name is reported once, as gone."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, common_opts='(name="common_v2")')
    with pytest.raises(CapabilityDriftError) as info:
        _run(mod, worlds.open())
    [change] = info.value.changes
    assert (change.key, change.new) == ("tools.common", None)
    assert change.old["qualname"] == "drift_flow.common"


def test_option_change_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed decorator option of a used tool is drift, keyed by the option."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, common_opts="(idempotent=True)")
    assert _drift_keys(mod, worlds.open()) == ["tools.common.options.idempotent"]


def test_workflow_version_change_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the workflow's ``version=`` marker makes resumes fail closed."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, flow_opts='(version="2")')
    assert _drift_keys(mod, worlds.open()) == ["workflow.options.version"]


def test_body_change_alone_is_not_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed function body with the same signature and options resumes (bump ``version=`` to refuse)."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, common_body="common, rewritten")
    assert _run(mod, worlds.open()) == 2


def test_added_model_slot_is_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model slot mapping that gained a slot is drift, keyed ``models.<slot>``."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch)
    with pytest.raises(CapabilityDriftError) as info:
        _run(mod, worlds.open(), models={"planner": "gpt-5"})
    assert [(c.key, c.old, c.new) for c in info.value.changes] == [("models.planner", None, "gpt-5")]


def test_finished_run_checks_drift_before_returning_its_output(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completed run does not hand back its recorded output to code that drifted."""
    mod = _deploy(monkeypatch)
    assert _run(mod, worlds.open()) == 2
    changed = _deploy(monkeypatch, common_extra=", strict: bool = True")
    assert _drift_keys(changed, worlds.open()) == ["tools.common.signature"]


def test_finished_run_returns_its_output_to_unchanged_code(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completed run returns its recorded output without running anything."""
    mod = _deploy(monkeypatch)
    assert _run(mod, worlds.open()) == 2
    again = _deploy(monkeypatch)
    assert _run(again, worlds.open()) == 2
    assert again.CALLS == []


def test_new_run_id_starts_fresh_after_drift(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second way out: the changed code runs under a new run id."""
    _crashed_run(worlds, monkeypatch)
    mod = _deploy(monkeypatch, common_extra=", strict: bool = True")
    world = worlds.open()
    with pytest.raises(CapabilityDriftError):
        _run(mod, world)
    assert asyncio.run(durable.run_workflow(mod.flow, 1, world=world, run_id="r2")) == 2
    assert mod.CALLS == ["common", "halt"]


def test_compacted_run_still_knows_what_it_used(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """After compaction into a snapshot, a changed used tool is still drift."""
    _crashed_run(worlds, monkeypatch)
    durable.compact("r1", world=worlds.open())
    assert [e.type for e in worlds.open().events("r1")] == ["snapshot"]
    mod = _deploy(monkeypatch, common_extra=", strict: bool = True")
    assert _drift_keys(mod, worlds.open()) == ["tools.common.signature"]
