"""Every run ends, or says why and how to fix it, in one process on every backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

import durable
from durable import ConfigurationError, Queue, RunBlockedError, Worker
from durable.runtime import run_status
from durable.runtime._start import backoff
from tests.runtime.test_runtime import until

BODIES: list[str] = []


@durable.step
async def same(x: int) -> int:
    return x


@durable.workflow
async def twice(x: int) -> int:
    BODIES.append("twice")
    await same(1)
    return await same(2)


@durable.workflow
async def asks(x: int) -> int:
    BODIES.append("asks")
    answer = durable.interrupt("how many?")
    return x + (0 if answer is None else int(answer))


@durable.tool
async def pay(cents: int) -> str:
    BODIES.append(f"pay:{cents}")
    return f"paid {cents}"


@durable.workflow
async def paying(cents: int) -> str:
    return f"done: {await pay(cents)}"


CUT = {"armed": False}


@durable.tool
async def charge(cents: int) -> str:
    BODIES.append(f"charge:{cents}")
    if CUT["armed"]:
        raise KeyboardInterrupt  # stands for the driver dying inside the call
    return f"charged {cents}"


@durable.workflow
async def charging(cents: int) -> str:
    return f"done: {await charge(cents)}"


async def blocked_on_a_cut_call(world: durable.World, run_id: str) -> str:
    """A run whose plain tool was cut mid-call, recovered and blocked; the key of the call."""
    CUT["armed"] = True
    try:
        await durable.run_workflow(charging, 5, world=world, run_id=run_id)
    except KeyboardInterrupt:
        pass
    finally:
        CUT["armed"] = False
    await durable.recover_runs(world, [charging])
    await until(lambda: run_status(world, run_id).status == "blocked")
    st = run_status(world, run_id)
    assert st.reason == "unknown_commit" and st.error is not None
    return str(st.error["key"])


async def test_resolved_as_happened_the_result_is_the_receipt_and_the_tool_does_not_run(
    world: durable.World,
) -> None:
    """resolve(happened=True, result=...) continues the run in the background with that result."""
    BODIES.clear()
    key = await blocked_on_a_cut_call(world, "h")
    h = durable.handle("h", world=world)
    with pytest.raises(RunBlockedError):
        await h.result(timeout=5)
    await h.resolve(key, happened=True, result="charged 5 by hand")
    assert await h.result(timeout=10) == "done: charged 5 by hand"
    assert BODIES == ["charge:5"]
    (decided,) = [e for e in world.events("h") if e.type == "run.resolved"]
    assert (decided.decision, decided.key, decided.result) == ("happened", key, "charged 5 by hand")  # type: ignore[union-attr]


async def test_resolved_as_not_happened_the_tool_runs_again(world: durable.World) -> None:
    """resolve(happened=False) lets the call run again with the same key; the run completes."""
    BODIES.clear()
    key = await blocked_on_a_cut_call(world, "n")
    h = durable.handle("n", world=world)
    await h.resolve(key, happened=False)
    assert await h.result(timeout=10) == "done: charged 5"
    assert BODIES == ["charge:5", "charge:5"]


@durable.workflow
async def ordering(cents: int) -> str:
    return f"ordered, {await charging(cents)}"


@pytest.mark.parametrize("happened", [True, False])
async def test_a_call_cut_in_a_child_run_is_resolved_in_the_child_and_its_parent_goes_on(
    world: durable.World, happened: bool
) -> None:
    """The blocked parent names the child run that holds the call; resolving it there finishes the parent."""
    BODIES.clear()
    CUT["armed"] = True
    try:
        await durable.run_workflow(ordering, 5, world=world, run_id="p")
    except KeyboardInterrupt:
        pass
    finally:
        CUT["armed"] = False
    await durable.recover_runs(world, [ordering])
    await until(lambda: run_status(world, "p").status == "blocked")
    st = run_status(world, "p")
    assert st.error is not None
    child, key = st.error["run_id"], st.error["key"]
    assert child != "p" and world.log.info(child).parent_run_id == "p"  # type: ignore[union-attr]
    assert st.fixes[0].startswith(f"little resolve '{child}' '{key}' --happened --result JSON")
    assert st.fixes[1].startswith(f"little resolve '{child}' '{key}' --not-happened")
    with pytest.raises(RunBlockedError, match=f"in child run '{child}'"):
        await durable.handle("p", world=world).result(timeout=5)
    # The fix, from Python: the parent's code is all this process knows (as --workflow gives it).
    result = "charged 5 by hand" if happened else None
    await durable.handle(child, world=world).resolve(
        key, happened=happened, result=result, workflows=[ordering]
    )
    out = await durable.handle("p", world=world).result(timeout=10)
    assert out == f"ordered, done: {result or 'charged 5'}"
    assert BODIES == ["charge:5"] if happened else ["charge:5", "charge:5"]


async def test_a_resolution_of_a_key_that_is_not_unconfirmed_is_refused(world: durable.World) -> None:
    """resolve() of a key with no unconfirmed call writes nothing and lists the open keys."""
    key = await blocked_on_a_cut_call(world, "k")
    before = len(world.log.read("k"))
    with pytest.raises(ConfigurationError, match="no unconfirmed call"):
        await durable.handle("k", world=world).resolve("tool:other#9", happened=False)
    with pytest.raises(ConfigurationError, match="happened=True or happened=False"):
        await durable.handle("k", world=world).resolve(key, happened="yes")  # type: ignore[arg-type]
    assert len(world.log.read("k")) == before
    assert run_status(world, "k").status == "blocked"


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "background"])
async def test_a_durable_error_in_a_worker_fails_the_run_and_result_reraises_it(
    world: durable.World, queued: bool
) -> None:
    """MaxVisitsExceededError ends the run failed (queued or background); result() re-raises it at once."""
    BODIES.clear()
    async with Worker(world, workflows=[twice], queues=[Queue("q")]):
        h = durable.start_workflow(twice, 1, world=world, queue="q" if queued else None)
        with pytest.raises(durable.MaxVisitsExceededError):
            await h.result(timeout=10)
        st = await h.status_detail()
        assert st.status == "failed"
        assert st.error is not None and st.error["error_type"].endswith("MaxVisitsExceededError")
        assert st.fixes[0].startswith(f"little resume {h.run_id}")
    assert BODIES == ["twice"]


async def test_resume_none_is_no_answer(world: durable.World) -> None:
    """run_workflow(..., resume=None) leaves an interrupted run waiting; answer(None) answers None."""
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(asks, 1, world=world, run_id="r")
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(asks, 1, world=world, run_id="r", resume=None)
    h = durable.handle("r", world=world)
    await h.answer(None, workflows=[asks])
    assert await h.result(timeout=10) == 1


async def test_answer_without_the_input_continues_a_queued_run_in_a_worker(world: durable.World) -> None:
    """handle.answer(value) in a process that never had the input puts the run back on its queue."""
    async with Worker(world, workflows=[asks], queues=[Queue("q")]):
        h = durable.start_workflow(asks, 40, world=world, queue="q")
        with pytest.raises(durable.RunInterrupted, match="answer"):
            await h.result(timeout=10)
        other = durable.handle(h.run_id, world=world)
        await other.answer(2)
        assert await other.result(timeout=10) == 42
    decided = [e for e in world.events(h.run_id) if e.type == "run.resolved"]
    assert [e.decision for e in decided] == ["answer"]  # type: ignore[union-attr]


async def test_answering_a_run_that_waits_for_nothing_is_refused(world: durable.World) -> None:
    """answer() on a completed run writes nothing and says why."""
    await durable.run_workflow(paying, 1, world=world, run_id="done")
    before = len(world.log.read("done"))
    with pytest.raises(ConfigurationError, match="waits for no answer"):
        await durable.handle("done", world=world).answer(1)
    assert len(world.log.read("done")) == before


async def test_a_blocked_run_raises_run_blocked_error_with_its_reason_cause_and_fixes(
    world: durable.World,
) -> None:
    """A run a worker left blocked: result() raises RunBlockedError; status_detail() says the same."""
    key = await blocked_on_a_cut_call(world, "b")
    st = await durable.handle("b", world=world).status_detail()
    assert (st.status, st.reason) == ("blocked", "unknown_commit")
    with pytest.raises(RunBlockedError) as raised:
        await durable.handle("b", world=world).result(timeout=5)
    assert raised.value.run_id == "b" and raised.value.reason == "unknown_commit"
    assert isinstance(raised.value.cause, durable.UnknownCommitError)
    assert raised.value.cause.key == key
    assert raised.value.fixes == st.fixes
    assert st.fixes[0].startswith(f"little resolve b '{key}' --happened --result JSON")


async def test_doctor_lists_nothing_on_a_healthy_world_and_a_blocked_run_with_its_fix(
    world: durable.World,
) -> None:
    """doctor() is empty for finished runs, and names a blocked run with the command that fixes it."""
    await durable.run_workflow(paying, 1, world=world, run_id="fine")
    assert durable.doctor(world) == []
    ctl = durable.runtime._driver.control_of(world)
    ctl.adopt("fine", "paying", owner="w", pid=1, host="h", now=world.clock())
    ctl.block("fine", json.dumps({"reason": "recovery_exhausted"}))
    (found,) = durable.doctor(world)
    assert (found.kind, found.run_id, found.reason) == ("blocked", "fine", "recovery_exhausted")
    assert found.fixes[0].startswith("little resume fine")
    assert found.line().startswith("fine: blocked (recovery_exhausted): ")


async def test_doctor_lists_an_enqueued_run_that_nobody_claims(world: durable.World) -> None:
    """An enqueued run older than ``stale`` is listed with the worker command that would claim it."""
    h = durable.start_workflow(paying, 1, world=world, queue="nobody")
    assert durable.doctor(world, stale=3600) == []
    (found,) = durable.doctor(world, stale=-1)
    assert (found.kind, found.run_id) == ("unclaimed", h.run_id)
    assert "--queue nobody" in found.fixes[0]


async def test_a_run_nobody_drives_is_listed_by_doctor_as_unserved() -> None:
    """A running run whose lock is free and that no live worker knows is named, with `little worker ...`."""
    world = durable.memory_world()
    ctl = durable.runtime._driver.control_of(world)
    ctl.adopt("w", "asks", owner="", pid=0, host="", now=world.clock() - 3600)
    ctl.reopen("w", None)
    (found,) = durable.doctor(world)
    assert (found.kind, found.reason, found.workflow) == ("unserved", "no_worker", "asks")
    assert found.fixes[0].startswith("little worker ")


def test_recoveries_back_off_from_immediate_to_a_minute() -> None:
    """The first recovery is immediate, then 1, 2, 4 ... seconds, never more than 60."""
    assert [backoff(n) for n in (1, 2, 3, 4, 5)] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert backoff(30) == 60.0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "5"])
def test_max_recovery_attempts_must_be_an_int_of_zero_or_more(bad: Any) -> None:
    """Worker() and @workflow refuse a bound that is not an int >= 0, at once."""
    with pytest.raises(ConfigurationError, match="max_recovery_attempts"):
        Worker(durable.memory_world(), workflows=[paying], max_recovery_attempts=bad)
    with pytest.raises(ConfigurationError, match="max_recovery_attempts"):

        @durable.workflow(max_recovery_attempts=bad)
        async def wf() -> None: ...


def test_max_recovery_attempts_is_not_part_of_the_manifest() -> None:
    """Changing the bound of a workflow does not make its runs drift."""
    from durable.engine._manifest import manifest_hash, run_manifest
    from durable.engine._spec import spec_of

    async def body() -> int:
        return 1

    a = spec_of(durable.workflow(name="same")(body))
    b = spec_of(durable.workflow(name="same", max_recovery_attempts=1)(body))
    assert a is not None and b is not None
    ma = run_manifest(a, {})
    mb = run_manifest(b, {})
    assert manifest_hash(ma) == manifest_hash(mb)


async def test_the_log_says_only_what_is_true_about_an_answered_queued_run(
    world: durable.World, caplog: pytest.LogCaptureFixture
) -> None:
    """An answered queued run is claimed from its queue again: no line says its driver is gone."""
    caplog.set_level("INFO", logger="durable")
    async with Worker(world, workflows=[asks], queues=[Queue("q")]):
        h = durable.start_workflow(asks, 1, world=world, queue="q")
        with pytest.raises(durable.RunInterrupted):
            await h.result(timeout=10)
        await h.answer(1)
        assert await h.result(timeout=10) == 2
    said = [r.getMessage() for r in caplog.records]
    assert sum("claimed run" in m for m in said) == 2
    assert not [m for m in said if "driver is gone" in m or "recovered run" in m]
