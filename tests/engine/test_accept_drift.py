"""Accepting drift on purpose: the advice of UnknownCommitError and CapabilityDriftError works."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import pytest

import durable
from durable import CapabilityDriftError, UnknownCommitError
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


def _app(calls: Counter[str], **options: Any) -> Any:
    @durable.tool(name="charge", **options)
    async def charge(amount: int) -> str:
        calls[durable.idempotency_key()] += 1
        return f"charged {amount}"

    @durable.workflow
    async def pay(amount: int) -> str:
        return await charge(amount)

    return pay


def _accept_keys(error: BaseException) -> list[str]:
    """The keys the error's own advice says to pass, read from its message."""
    m = re.search(r"accept_drift=\[(.*?)\]\)", str(error))
    assert m is not None, str(error)
    return [k.strip().strip('"') for k in m.group(1).split(",")]


def _crash_in_flight(worlds: Worlds, calls: Counter[str]) -> None:
    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(_app(calls), 5, world=worlds.crashing(on("effect.receipt")), run_id="r")
        )


def test_following_the_advice_of_an_unknown_commit_resumes_the_run(worlds: Worlds) -> None:
    """Unknown commit → mark idempotent → drift naming the key → accept it: re-driven with its key."""
    calls: Counter[str] = Counter()
    _crash_in_flight(worlds, calls)
    with pytest.raises(UnknownCommitError, match="accept_drift"):
        asyncio.run(durable.run_workflow(_app(calls), 5, world=worlds.open(), run_id="r"))
    fixed = _app(calls, idempotent=True)
    with pytest.raises(CapabilityDriftError) as info:
        asyncio.run(durable.run_workflow(fixed, 5, world=worlds.open(), run_id="r"))
    keys = _accept_keys(info.value)
    assert keys == ["tools.charge.options.idempotent"]
    out = asyncio.run(durable.run_workflow(fixed, 5, world=worlds.open(), run_id="r", accept_drift=keys))
    assert out == "charged 5"
    assert calls == Counter({"r:tool:charge#0": 2})  # the crashed call, then the re-drive, same key
    again = asyncio.run(durable.run_workflow(fixed, 5, world=worlds.open(), run_id="r"))
    assert again == "charged 5"  # later resumes compare with the accepted manifest
    accepted = [e for e in worlds.open().events("r") if e.type == "drift.accepted"]
    assert [c["key"] for c in accepted[0].changes] == keys  # type: ignore[union-attr]


def test_accepting_only_some_of_the_drift_still_fails(worlds: Worlds) -> None:
    """Every changed key must be accepted; a partial list changes nothing in the log."""
    calls: Counter[str] = Counter()
    _crash_in_flight(worlds, calls)
    world = worlds.open()
    before = len(world.events("r"))
    changed = _app(calls, idempotent=True, version="2")
    with pytest.raises(CapabilityDriftError, match=r"options\.version"):
        asyncio.run(
            durable.run_workflow(
                changed, 5, world=world, run_id="r", accept_drift=["tools.charge.options.idempotent"]
            )
        )
    assert len(world.events("r")) == before


def test_accept_drift_takes_a_list_of_keys(worlds: Worlds) -> None:
    """A bare string is refused before anything is read or written."""
    with pytest.raises(durable.ConfigurationError, match="list of drift keys"):
        asyncio.run(
            durable.run_workflow(
                _app(Counter()), 5, world=worlds.open(), accept_drift="tools.charge.options.idempotent"
            )
        )


def test_a_session_drift_can_be_accepted(worlds: Worlds) -> None:
    """A tool option changed inside a session is accepted by the key the session error prints."""

    def build(**options: Any) -> Any:
        @durable.tool(name="look", **options)
        async def look(q: str) -> str:
            return q.upper()

        @durable.workflow
        async def agent() -> str:
            async with durable.session("worker", tools=[look]):
                found = await look("a")
            return f"{found} {durable.interrupt('go?')}"

        return agent

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(build(), world=worlds.open(), run_id="s"))
    with pytest.raises(CapabilityDriftError) as info:
        asyncio.run(durable.run_workflow(build(version="2"), world=worlds.open(), run_id="s", resume="yes"))
    keys = _accept_keys(info.value)
    out = asyncio.run(
        durable.run_workflow(
            build(version="2"), world=worlds.open(), run_id="s", resume="yes", accept_drift=keys
        )
    )
    assert out == "A yes"


def test_a_timeout_with_a_plain_tool_in_flight_says_a_resume_needs_a_check(worlds: Worlds) -> None:
    """RunTimeoutError tells the truth: with a plain tool unconfirmed, a plain resume would refuse."""
    gate = asyncio.Event()

    @durable.tool(name="slow")
    async def slow() -> str:
        await gate.wait()
        return "done"

    @durable.workflow
    async def wf() -> str:
        return await slow()

    world = worlds.open()
    with pytest.raises(durable.RunTimeoutError, match="UnknownCommitError") as info:
        asyncio.run(durable.run_workflow(wf, world=world, run_id="t", timeout=0.05))
    assert "stays resumable" not in str(info.value)
    with pytest.raises(UnknownCommitError):
        asyncio.run(durable.run_workflow(wf, world=worlds.open(), run_id="t"))


def test_little_replay_shows_the_accepted_drift(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``little replay --json`` lists each accepted change with its old and new value."""
    import json

    from durable.cli import main
    from durable.testing import CrashingLog

    calls: Counter[str] = Counter()
    world = durable.local_world(tmp_path)
    crashing = durable.World(CrashingLog(world.log, crash_before=on("effect.receipt")), world.locks)
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(_app(calls), 5, world=crashing, run_id="r"))
    world.close()
    keys = ["tools.charge.options.idempotent"]
    with durable.local_world(tmp_path) as world:
        asyncio.run(
            durable.run_workflow(_app(calls, idempotent=True), 5, world=world, run_id="r", accept_drift=keys)
        )
    capsys.readouterr()
    assert main(["replay", "r", "--data-dir", str(tmp_path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["accepted_drift"]
    assert shown == [{"key": keys[0], "old": False, "new": True, "session": None}]
