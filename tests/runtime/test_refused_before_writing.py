"""Text UTF-8 cannot encode, in an input or a run id, is a typed error naming it, before any write."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import durable


class Ticket(BaseModel):
    subject: str


@durable.workflow
async def echo(text: str) -> str:
    return text


@durable.workflow
async def file_ticket(ticket: Ticket) -> str:
    return ticket.subject


async def _call(how: str, world: durable.World, wf: Any, value: Any, run_id: str) -> None:
    """Start, run, find or resume the run as ``how`` says."""
    if how == "run_workflow":
        await durable.run_workflow(wf, value, world=world, run_id=run_id)
    elif how in ("start_workflow", "queued"):
        durable.start_workflow(wf, value, world=world, run_id=run_id, queue="q" if how == "queued" else None)
    elif how == "handle":
        durable.handle(run_id, world=world)
    else:
        await durable.resume_run(run_id, world=world)


def _nothing_written(world: durable.World) -> None:
    assert world.runs() == []
    assert durable.doctor(world) == []


@pytest.mark.parametrize(
    ("wf", "value", "param"),
    [(echo, "caf\udce9", "text"), (file_ticket, Ticket(subject="\ud800 refund"), "ticket")],
    ids=["str", "model field"],
)
@pytest.mark.parametrize("how", ["run_workflow", "start_workflow", "queued"])
async def test_a_lone_surrogate_in_an_input_is_a_serialization_error_naming_the_input(
    world: durable.World, wf: Any, value: Any, param: str, how: str
) -> None:
    """The error names the workflow, its parameter and the run; no run and no control record exist."""
    with pytest.raises(durable.SerializationError) as err:
        await _call(how, world, wf, value, "r")
    text = str(err.value)
    assert f"the input of workflow {wf.__name__!r} (parameter {param!r})" in text
    assert "in run 'r'" in text and "lone surrogates" in text
    assert err.value.run_id == "r"
    _nothing_written(world)
    with pytest.raises(durable.RunNotFoundError):
        durable.handle("r", world=world)


@pytest.mark.parametrize("how", ["run_workflow", "start_workflow", "handle", "resume_run"])
async def test_a_lone_surrogate_in_a_run_id_is_a_configuration_error_naming_it(
    world: durable.World, how: str
) -> None:
    """run_workflow, start_workflow, handle and resume_run refuse it with advice; nothing is written."""
    with pytest.raises(durable.ConfigurationError) as err:
        await _call(how, world, echo, "hi", "order-\ud800")
    text = str(err.value)
    assert "'order-\\ud800'" in text and "not valid Unicode text" in text
    assert "without lone surrogates" in text and "Nothing was written" in text
    _nothing_written(world)
