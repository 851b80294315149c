"""A run id given again: the same input returns its run, another input raises RunInputMismatchError."""

from __future__ import annotations

import pytest

import durable
from durable import RunFailedError, RunInputMismatchError
from durable.engine import value_hash
from durable.runtime._driver import control_of
from tests.conftest import Worlds

tickets = durable.Queue("tickets")


@durable.workflow
async def triage(ticket: str) -> str:
    return f"triaged {ticket}"


@durable.workflow
async def other(ticket: str) -> str:
    return ticket


def _mismatch(info: pytest.ExceptionInfo[RunInputMismatchError], run_id: str, old: str, new: str) -> None:
    """The error names the run and both hashes, and keeps the contract of RunFailedError."""
    err = info.value
    assert isinstance(err, RunFailedError)
    assert (err.cause_code, err.reason, err.run_id) == ("runtime_config_error", "run_input_mismatch", run_id)
    assert (err.recorded_hash, err.input_hash) == (value_hash(old), value_hash(new))
    assert run_id in str(err) and err.recorded_hash in str(err) and err.input_hash in str(err)


async def test_start_workflow_with_a_finished_runs_id_and_another_input_raises(worlds: Worlds) -> None:
    """A second start of ticket-1's id with ticket-2 raises instead of returning ticket-1's run."""
    world = worlds.open()
    first = durable.start_workflow(triage, "ticket-1", world=world, run_id="ticket")
    assert await first.result(timeout=30) == "triaged ticket-1"
    with pytest.raises(RunInputMismatchError) as info:
        durable.start_workflow(triage, "ticket-2", world=world, run_id="ticket")
    _mismatch(info, "ticket", "ticket-1", "ticket-2")
    again = durable.start_workflow(triage, "ticket-1", world=world, run_id="ticket")
    assert await again.result(timeout=30) == "triaged ticket-1"


def test_start_workflow_with_an_enqueued_runs_id_and_another_input_raises(worlds: Worlds) -> None:
    """A run waiting on its queue keeps its input: another input for its id raises, the same returns it."""
    world = worlds.open()
    durable.start_workflow(triage, "ticket-1", world=world, run_id="queued", queue=tickets)
    with pytest.raises(RunInputMismatchError) as info:
        durable.start_workflow(triage, "ticket-2", world=world, run_id="queued", queue=tickets)
    _mismatch(info, "queued", "ticket-1", "ticket-2")
    same = durable.start_workflow(triage, "ticket-1", world=world, run_id="queued", queue=tickets)
    assert same.run_id == "queued"
    rec = control_of(world).get("queued")
    assert rec is not None and rec.state == "enqueued"


def test_start_workflow_with_a_runs_id_and_another_workflow_raises(worlds: Worlds) -> None:
    """A run id of another workflow's run is refused as run_workflow refuses it."""
    world = worlds.open()
    durable.start_workflow(triage, "ticket-1", world=world, run_id="queued", queue=tickets)
    with pytest.raises(RunFailedError) as info:
        durable.start_workflow(other, "ticket-1", world=world, run_id="queued", queue=tickets)
    assert info.value.reason == "run_workflow_mismatch"


async def test_run_workflow_with_another_input_raises_the_same_error(worlds: Worlds) -> None:
    """run_workflow's resume with another input raises RunInputMismatchError, and writes nothing."""
    world = worlds.open()
    assert await durable.run_workflow(triage, "ticket-1", world=world, run_id="r") == "triaged ticket-1"
    events = len(world.events("r"))
    with pytest.raises(RunInputMismatchError) as info:
        await durable.run_workflow(triage, "ticket-2", world=world, run_id="r")
    _mismatch(info, "r", "ticket-1", "ticket-2")
    assert len(world.events("r")) == events
