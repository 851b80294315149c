"""What the unhappy path says is true, and its advice, followed, works."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, field_validator

import durable
from durable import Queue, Worker
from durable.runtime import run_status
from tests.helpers.procs import run_here
from tests.helpers.procs import unhappy_app as app
from tests.runtime.test_runtime import until

STRICT = {"on": False}


class Order(BaseModel):
    sku: str

    @field_validator("sku")
    @classmethod
    def _known(cls, v: str) -> str:
        if STRICT["on"] and not v.startswith("SKU-"):
            raise ValueError("unknown sku")
        return v


@durable.workflow
async def ship(order: Order) -> str:
    answer = durable.interrupt(f"ship {order.sku}?")
    return f"{order.sku}: {answer}"


@pytest.fixture(autouse=True)
def _lenient(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    STRICT["on"] = False
    monkeypatch.setenv("DURABLE_TEST_DIR", str(tmp_path))  # where run_here's bodies note themselves


async def test_a_recorded_input_the_validator_now_rejects_fails_the_run_and_resume_after_the_fix_ends_it(
    world: durable.World,
) -> None:
    """The error says the run failed and that resuming after fixing the validation continues it; it does."""
    async with Worker(world, workflows=[ship], queues=[Queue("q")]):
        h = durable.start_workflow(ship, Order(sku="a1"), world=world, queue="q")
        await until(lambda: run_status(world, h.run_id).status == "interrupted")
        STRICT["on"] = True  # a deploy tightened the validator
        await h.answer("yes")
        await until(lambda: run_status(world, h.run_id).status == "failed")
        st = run_status(world, h.run_id)
        assert st.error is not None
        said = st.error["error_message"]
        assert f"the input that run {h.run_id!r} recorded is no longer valid" in said
        assert f"`little resume {h.run_id}`" in said and "nothing was recorded" not in said
        assert [e.type for e in world.events(h.run_id)][-1] == "run.failed"
        STRICT["on"] = False  # the advice: fix the validation, then resume
        await durable.resume_run(h.run_id, world=world)
        assert await h.result(timeout=30) == "a1: yes"


async def test_an_input_rejected_on_a_new_run_says_nothing_was_recorded(world: durable.World) -> None:
    """A caller's own bad input writes nothing, and the error says so."""
    STRICT["on"] = True
    with pytest.raises(durable.RunFailedError, match="nothing was recorded"):
        await durable.run_workflow(ship, {"sku": "a1"}, world=world, run_id="r")
    assert world.runs() == []


@durable.workflow(name="paying")
async def paying_without_the_tool(cents: int) -> str:
    """The workflow ``paying`` after a change that dropped its tool."""
    return f"done: {cents}"


async def test_resolving_with_code_that_lacks_the_tool_says_so(world: durable.World) -> None:
    """A resolution whose workflow no longer calls the tool names that, not a missing workflows=."""
    run_here.CUT["armed"] = True
    try:
        with pytest.raises(KeyboardInterrupt):
            await durable.run_workflow(run_here.paying, 5, world=world, run_id="p")
    finally:
        run_here.CUT["armed"] = False
    with pytest.raises(durable.UnknownCommitError) as cut:
        await durable.run_workflow(run_here.paying, 5, world=world, run_id="p")
    h = durable.handle("p", world=world)
    with pytest.raises(durable.ConfigurationError) as err:
        await h.resolve(cut.value.key, happened=True, result="ch_1", workflows=[paying_without_the_tool])
    text = str(err.value)
    assert "workflow 'paying' as this process has it" in text and "calls no tool 'charge'" in text
    assert "pass workflows=" not in text and "Nothing was written" in text
    assert run_status(world, "p").status == "blocked"


async def test_the_fix_of_a_nondeterministic_run_says_to_deploy_matching_code_first(
    world: durable.World, tmp_path: Path
) -> None:
    """Doctor and the error say "after deploying code that matches the log"; doing so, a resume ends it."""
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(app.nondeterminism, 1, world=world, run_id="n")
    (tmp_path / "shifted").touch()  # a deploy changed the path the run took
    with pytest.raises(durable.NondeterminismError):
        await durable.run_workflow(app.nondeterminism, 1, world=world, run_id="n", resume=2)
    (found,) = durable.doctor(world)
    when = "after deploying code that matches the log"
    assert (found.kind, found.reason, found.when) == ("blocked", "nondeterminism", when)
    assert f"; fix ({when}): little resume n" in found.line()
    h = durable.handle("n", world=world)
    with pytest.raises(durable.RunBlockedError, match=f"Unblock it, {when}, with"):
        await h.result(timeout=10)
    (tmp_path / "shifted").unlink()  # the advice: deploy code that matches the log
    await durable.resume_run("n", world=world, workflows=[app.nondeterminism])
    assert await h.result(timeout=30) == 3  # the answer given with resume= was recorded before the refusal
