"""Human in the loop: durable.interrupt suspends a run; run_workflow(..., resume=answer) answers it."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import ConfigurationError, RunInterrupted, SerializationError
from durable.cli import main as little
from tests.conftest import Worlds


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def types(world: durable.World, run_id: str) -> list[str]:
    return [e.type for e in world.events(run_id)]


def approval_workflow(calls: Counter[str]) -> Any:
    """Draft, ask a human, publish what they approved."""

    @durable.step
    async def draft(topic: str) -> str:
        calls["draft"] += 1
        return f"post about {topic}"

    @durable.step
    async def publish(text: str) -> str:
        calls["publish"] += 1
        return f"published: {text}"

    @durable.workflow(name="approval")
    async def wf(topic: str) -> str:
        text = await draft(topic)
        verdict = durable.interrupt({"approve": text})
        if verdict != "yes":
            return "rejected"
        return await publish(text)

    return wf


def test_interrupt_suspends_the_run_with_value_run_id_and_path(world: durable.World) -> None:
    """The first call ends in RunInterrupted carrying the value, the run id and the interrupt's path."""
    calls = Counter[str]()
    wf = approval_workflow(calls)

    with pytest.raises(RunInterrupted) as info:
        run(durable.run_workflow(wf, "cats", world=world, run_id="r"))
    assert (info.value.value, info.value.run_id, info.value.path) == (
        {"approve": "post about cats"},
        "r",
        "interrupt#1",
    )
    assert types(world, "r")[-2:] == ["interrupt", "run.interrupted"]
    assert world.runs()[0].status == "interrupted"


def test_calling_an_interrupted_run_without_an_answer_raises_again_and_runs_nothing(
    world: durable.World,
) -> None:
    """A waiting run called again without resume= raises RunInterrupted and writes nothing."""
    calls = Counter[str]()
    wf = approval_workflow(calls)
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, "cats", world=world, run_id="r"))
    before = types(world, "r")

    with pytest.raises(RunInterrupted, match="interrupt#1"):
        run(durable.run_workflow(wf, "cats", world=world, run_id="r"))
    assert types(world, "r") == before
    assert calls["draft"] == 1


def test_resume_answers_the_interrupt_and_the_run_finishes(worlds: Worlds) -> None:
    """resume=answer records interrupt.resumed; interrupt() returns the answer; nothing before it re-runs."""
    calls = Counter[str]()
    wf = approval_workflow(calls)
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, "cats", world=worlds.open(), run_id="r"))

    world = worlds.open()
    assert run(durable.run_workflow(wf, "cats", world=world, run_id="r", resume="yes")) == (
        "published: post about cats"
    )
    resumed = [e for e in world.events("r") if e.type == "interrupt.resumed"]
    assert [(e.path, e.value) for e in resumed] == [("interrupt#1", "yes")]  # type: ignore[union-attr]
    assert calls == Counter({"draft": 1, "publish": 1})


def test_answer_decides_the_path_the_run_takes(world: durable.World) -> None:
    """A different answer takes the other branch of the workflow."""
    calls = Counter[str]()
    wf = approval_workflow(calls)
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, "cats", world=world, run_id="r"))
    assert run(durable.run_workflow(wf, "cats", world=world, run_id="r", resume="no")) == "rejected"
    assert calls["publish"] == 0


def test_several_interrupts_are_answered_in_order(worlds: Worlds) -> None:
    """Each interrupt in turn suspends the run and each answer goes to the interrupt at its path."""

    @durable.workflow
    async def wf() -> list[Any]:
        name = durable.interrupt("name?")
        age = durable.interrupt("age?")
        return [name, age]

    with pytest.raises(RunInterrupted) as first:
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    with pytest.raises(RunInterrupted) as second:
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r", resume="ada"))
    out = run(durable.run_workflow(wf, world=worlds.open(), run_id="r", resume=36))
    assert (first.value.value, second.value.value) == ("name?", "age?")
    assert (first.value.path, second.value.path) == ("interrupt#0", "interrupt#1")
    assert out == ["ada", 36]


def test_interrupts_in_parallel_branches_are_keyed_by_path(worlds: Worlds) -> None:
    """Interrupts in two branches are asked one by one and each answer reaches its own branch."""

    @durable.step
    async def ask(who: str) -> str:
        return f"{who}: {durable.interrupt(f'ok for {who}?')}"

    @durable.workflow
    async def wf(people: list[str]) -> list[str]:
        return await durable.parallel("ask", people, ask, key=str)

    asked = []
    answer: Any = None
    for _ in range(3):
        try:
            kwargs = {} if answer is None else {"resume": answer}
            out = run(durable.run_workflow(wf, ["ann", "bob"], world=worlds.open(), run_id="r", **kwargs))
            break
        except RunInterrupted as exc:
            asked.append(exc.path)
            answer = "yes " + exc.path.split("[")[1].split("]")[0]
    assert asked == ["ask[ann].ask.interrupt#0", "ask[bob].ask.interrupt#0"]
    assert out == ["ann: yes ann", "bob: yes bob"]


def test_user_code_cannot_swallow_an_interrupt_with_except_exception(world: durable.World) -> None:
    """RunInterrupted is a BaseException, so a broad except in the workflow does not hide it."""

    @durable.workflow
    async def wf() -> str:
        try:
            return str(durable.interrupt("go?"))
        except Exception:
            return "swallowed"

    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, world=world, run_id="r"))


def test_resume_for_a_run_that_does_not_exist_fails_and_records_nothing(world: durable.World) -> None:
    """resume= on a new run id raises ConfigurationError and starts no run."""
    wf = approval_workflow(Counter())

    with pytest.raises(ConfigurationError, match="does not exist"):
        run(durable.run_workflow(wf, "cats", world=world, run_id="new", resume="yes"))
    assert world.runs() == []


def test_unserializable_answer_fails_and_the_run_still_waits(world: durable.World) -> None:
    """An answer that JSON cannot hold raises SerializationError; the run keeps waiting for a good one."""
    wf = approval_workflow(Counter())
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(wf, "cats", world=world, run_id="r"))
    before = types(world, "r")

    with pytest.raises(SerializationError, match="resume answer"):
        run(durable.run_workflow(wf, "cats", world=world, run_id="r", resume=object()))
    assert types(world, "r") == before
    assert run(durable.run_workflow(wf, "cats", world=world, run_id="r", resume="yes")).startswith(
        "published"
    )


def test_interrupt_outside_a_run_is_a_configuration_error() -> None:
    """durable.interrupt() needs a run to suspend."""
    with pytest.raises(ConfigurationError, match="inside a durable run"):
        durable.interrupt("hello?")


def test_little_replay_shows_a_run_waiting_for_an_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little replay` reports status interrupted and the path that waits for an answer."""
    data = tmp_path / "data"
    with durable.local_world(data) as world, pytest.raises(RunInterrupted):
        run(durable.run_workflow(approval_workflow(Counter()), "cats", world=world, run_id="r"))

    assert little(["replay", "r", "--data-dir", str(data), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "interrupted"
    assert shown["waiting_for_answer"] == ["interrupt#1"]


def test_an_awaited_interrupt_is_refused_on_its_first_drive_and_the_fix_resumes(world: durable.World) -> None:
    """`await durable.interrupt(...)` fails at once, naming the mistake and its line; the fix resumes."""

    @durable.workflow(name="awaited")
    async def awaited(topic: str) -> str:
        verdict = await durable.interrupt({"approve": topic})  # the mistake
        return str(verdict)

    @durable.workflow(name="awaited")
    async def fixed(topic: str) -> str:
        verdict = durable.interrupt({"approve": topic})
        return str(verdict)

    line = awaited.__code__.co_firstlineno + 2
    with pytest.raises(ConfigurationError) as info:
        run(durable.run_workflow(awaited, "cats", world=world, run_id="r"))
    assert "durable.interrupt() is not awaited: remove the await" in str(info.value)
    assert f"{__file__}:{line}" in str(info.value)
    assert "interrupt" not in types(world, "r")  # nothing of the interrupt was recorded
    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(fixed, "cats", world=world, run_id="r", retry_failed=True))
    assert run(durable.run_workflow(fixed, "cats", world=world, run_id="r", resume="yes")) == "yes"


def test_a_resume_through_an_awaited_interrupt_names_the_mistake(world: durable.World) -> None:
    """A run waiting at an interrupt, answered through code that awaits it, says so instead of a TypeError."""

    @durable.workflow(name="asks")
    async def asks(topic: str) -> str:
        return str(durable.interrupt(topic))

    @durable.workflow(name="asks")
    async def awaits(topic: str) -> str:
        return str(await durable.interrupt(topic))

    with pytest.raises(RunInterrupted):
        run(durable.run_workflow(asks, "cats", world=world, run_id="r"))
    with pytest.raises(ConfigurationError, match=r"durable\.interrupt\(\) is not awaited: remove the await"):
        run(durable.run_workflow(awaits, "cats", world=world, run_id="r", resume="yes"))
    assert run(durable.run_workflow(asks, "cats", world=world, run_id="r", retry_failed=True)) == "yes"
