"""A run continued by newer code: its manifest follows the code that made its latest calls (every backend)."""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import CapabilityDriftError
from durable.cli._deploy import export_run
from durable.testing import replay_file
from tests.conftest import Worlds
from tests.helpers.codegen import load_source

SOURCE = """
import durable

CALLS = []
STOP = set()


class Crash(BaseException):
    pass


@durable.step
async def prepare(x: int{prepare_extra}) -> int:
    CALLS.append("prepare")
    return x


@durable.step(max_visits=2)
async def halt(n: int) -> int:
    if n in STOP:
        raise Crash()
    return n


@durable.step
async def finish({finish_params}) -> int:
    CALLS.append("finish")
    return 10 * {finish_arg}


@durable.workflow
async def flow(x: int) -> int:
    a = await prepare(x)
    await halt(1)
    b = await finish(a)
    await halt(2)
    return b
"""

V1 = {"prepare_extra": "", "finish_params": "x: int", "finish_arg": "x"}
V2 = {"prepare_extra": ", strict: bool = False", "finish_params": "value: int", "finish_arg": "value"}
"""The new code: ``prepare`` gained a parameter with a default (compatible), ``finish`` renamed its
parameter (drift for a run that used it, none for a run that had not reached it)."""


def _code(monkeypatch: pytest.MonkeyPatch, version: dict[str, str], *stop: int) -> types.ModuleType:
    mod = load_source(monkeypatch, "mixed_app", SOURCE.format(**version))
    mod.STOP.update(stop)
    return mod


def _run(mod: types.ModuleType, worlds: Worlds) -> Any:
    return asyncio.run(durable.run_workflow(mod.flow, 4, world=worlds.open(), run_id="r"))


def _mixed_run(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started by v1 (``prepare``), continued by v2 (``finish``, which v2 changed), cut after both."""
    v1 = _code(monkeypatch, V1, 1)
    with pytest.raises(v1.Crash):
        _run(v1, worlds)
    v2 = _code(monkeypatch, V2, 2)
    with pytest.raises(v2.Crash):
        _run(v2, worlds)  # allowed: nothing the log held used what v2 changed
    assert v2.CALLS == ["finish"]


def test_the_code_that_made_the_calls_finishes_a_mixed_run(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v2 resumes it again (its own finish, v1's prepare under a compatible change); v1 sees drift."""
    _mixed_run(worlds, monkeypatch)
    v1 = _code(monkeypatch, V1)
    with pytest.raises(CapabilityDriftError) as info:
        _run(v1, worlds)  # drift, before any call: never a NondeterminismError half way
    assert "steps.finish.signature" in [c.key for c in info.value.changes]
    assert v1.CALLS == []
    v2 = _code(monkeypatch, V2)
    assert _run(v2, worlds) == 40
    assert v2.CALLS == []  # prepare and finish replayed


def test_the_log_says_which_code_took_the_run_over(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """v2's first write records a drift.accepted with no accepted change, and what it replaced."""
    _mixed_run(worlds, monkeypatch)
    events = worlds.open().events("r")
    taken = [e for e in events if e.type == "drift.accepted"]
    assert len(taken) == 1
    event: Any = taken[0]
    assert event.changes == []
    replaced = {c["key"] for c in event.replaced}
    assert {"steps.finish.signature", "steps.prepare.signature"} <= replaced
    started: Any = events[0]
    assert event.manifest_hash != started.manifest_hash
    after = [e.type for e in events if e.seq > event.seq]
    assert after and after[0] != "drift.accepted"  # written with the first call v2 made


def test_a_drive_that_writes_nothing_takes_nothing_over(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that v2 replays to a call it refuses keeps v1's manifest: v1 still finishes it."""
    v1 = _code(monkeypatch, V1, 1)
    with pytest.raises(v1.Crash):
        _run(v1, worlds)
    world = worlds.open()
    before = len(world.events("r"))
    v2 = _code(monkeypatch, V2)
    got = asyncio.run(durable.dry_resume(v2.flow, "r", world=world))
    assert got.ok and got.continues_at == "halt.visit[0]", got.line()
    assert len(world.events("r")) == before
    again = _code(monkeypatch, V1)
    assert _run(again, worlds) == 40
    assert not [e for e in worlds.open().events("r") if e.type == "drift.accepted"]


def test_dry_resume_and_replay_file_of_a_mixed_run_pass_under_the_code_that_made_it(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under v2 both replay the run; under v1 both report the drift a real resume would raise."""
    _mixed_run(worlds, monkeypatch)
    world = worlds.open()
    v2 = _code(monkeypatch, V2)
    got = asyncio.run(durable.dry_resume(v2.flow, "r", world=world))
    assert got.ok and got.continues_at == "halt.visit[1]", got.line()
    exported = tmp_path / "run.json"
    exported.write_text(json.dumps(export_run(world, "r")))
    assert replay_file(exported, v2.flow).ok
    v1 = _code(monkeypatch, V1)
    assert not asyncio.run(durable.dry_resume(v1.flow, "r", world=world)).ok
    with pytest.raises(CapabilityDriftError):
        replay_file(exported, v1.flow)
