"""Failure semantics: recorded failures come back on resume; retry_failed=True re-runs only what failed."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import durable
from durable import NonRetryableError, RetryPolicy, StepFailedError
from tests.conftest import Worlds


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def types(world: durable.World, run_id: str) -> list[str]:
    return [e.type for e in world.events(run_id)]


class QuotaExceeded(Exception):
    """A user-defined error type, importable from this module."""


class NeedsTwoArgs(Exception):
    """An error whose constructor cannot be called with the recorded arguments alone."""

    def __init__(self, code: int, *, detail: str):
        super().__init__(f"{code}: {detail}")


def failing_workflow(calls: Counter[str], exc: BaseException) -> Any:
    @durable.step
    async def boom() -> int:
        calls["boom"] += 1
        raise exc

    @durable.workflow(name="wf")
    async def wf() -> int:
        return await boom()

    return wf


def test_recorded_user_error_is_rebuilt_as_its_own_type(worlds: Worlds) -> None:
    """A failure of a type defined in user code comes back on resume as that type, with its message."""
    calls = Counter[str]()
    wf = failing_workflow(calls, QuotaExceeded("limit 10 reached"))
    with pytest.raises(QuotaExceeded):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))

    with pytest.raises(QuotaExceeded, match="limit 10 reached") as info:
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert type(info.value) is QuotaExceeded
    assert calls["boom"] == 1


def test_error_that_cannot_be_rebuilt_becomes_step_failed_error(worlds: Worlds) -> None:
    """A type whose constructor does not take the recorded arguments comes back as StepFailedError."""
    calls = Counter[str]()
    wf = failing_workflow(calls, NeedsTwoArgs(7, detail="bad gateway"))
    with pytest.raises(NeedsTwoArgs):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))

    with pytest.raises(StepFailedError) as info:
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    err = info.value
    assert err.error_type == f"{__name__}.NeedsTwoArgs"
    assert err.error_message == "7: bad gateway"
    assert err.run_id == "r"
    assert "7: bad gateway" in str(err)
    assert calls["boom"] == 1


def test_step_failed_error_names_the_type_message_and_path() -> None:
    """An unknown recorded type is rebuilt as StepFailedError whose message says type, message and path."""
    from durable.engine._failures import rebuild_error

    err = rebuild_error("gone.module.Vanished", "it broke", run_id="r", path="a[1].b")
    assert isinstance(err, StepFailedError)
    assert (err.path, err.error_type, err.error_message) == ("a[1].b", "gone.module.Vanished", "it broke")
    assert "a[1].b" in str(err)
    assert "gone.module.Vanished" in str(err)


def test_rebuilding_never_imports_a_module_named_by_the_log() -> None:
    """A recorded type from a module this process has not imported is not imported to rebuild it."""
    import sys

    from durable.engine._failures import rebuild_error

    assert "tabnanny" not in sys.modules  # a stdlib module with an exception class, unused here
    err = rebuild_error("tabnanny.NannyNag", "x", run_id="r", path="p")
    assert isinstance(err, StepFailedError)
    assert "tabnanny" not in sys.modules


def test_non_retryable_error_is_replayed_as_its_own_type(world: durable.World) -> None:
    """A recorded NonRetryableError comes back on resume as NonRetryableError, not a generic error."""
    calls = Counter[str]()
    wf = failing_workflow(calls, NonRetryableError("card declined"))
    with pytest.raises(NonRetryableError):
        run(durable.run_workflow(wf, world=world, run_id="r"))

    with pytest.raises(NonRetryableError, match="card declined"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert calls["boom"] == 1


def test_rebuilt_non_retryable_error_carries_the_recorded_path() -> None:
    """rebuild_error gives a recorded NonRetryableError the path it was recorded at."""
    from durable.engine._failures import rebuild_error

    err = rebuild_error("durable.errors.NonRetryableError", "card declined", run_id="r", path="pay")
    assert isinstance(err, NonRetryableError)
    assert (err.path, err.run_id) == ("pay", "r")


def retry_failed_workflow(calls: Counter[str], state: dict[str, bool]) -> Any:
    """Two steps: ``fetch`` commits, then ``store`` calls a tool that fails while state['down']."""

    @durable.step
    async def fetch() -> int:
        calls["fetch"] += 1
        return 41

    @durable.tool
    async def save(n: int) -> int:
        calls["save"] += 1
        if state["down"]:
            raise ConnectionError("database down")
        return n + 1

    @durable.step
    async def store(n: int) -> int:
        calls["store"] += 1
        return await save(n)

    @durable.workflow(name="wf")
    async def wf() -> int:
        return await store(await fetch())

    return wf


def test_retry_failed_reruns_only_what_failed(worlds: Worlds) -> None:
    """retry_failed=True writes run.retried and re-runs the failed step and tool, not the committed one."""
    calls = Counter[str]()
    state = {"down": True}
    wf = retry_failed_workflow(calls, state)
    with pytest.raises(ConnectionError):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))

    state["down"] = False
    world = worlds.open()
    assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == 42
    retried = [e for e in world.events("r") if e.type == "run.retried"]
    assert sorted(retried[0].paths) == ["store", "store.tool:save#0"]  # type: ignore[union-attr]
    assert calls == Counter({"fetch": 1, "store": 2, "save": 2})


def test_without_retry_failed_a_failed_run_reraises_and_runs_nothing(worlds: Worlds) -> None:
    """A failed run called again without retry_failed re-raises the recorded error."""
    calls = Counter[str]()
    state = {"down": True}
    wf = retry_failed_workflow(calls, state)
    with pytest.raises(ConnectionError):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    state["down"] = False

    with pytest.raises(ConnectionError, match="database down"):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert calls == Counter({"fetch": 1, "store": 1, "save": 1})


def test_retry_failed_on_a_completed_run_changes_nothing(world: durable.World) -> None:
    """retry_failed=True on a completed run returns its output and writes no run.retried."""
    calls = Counter[str]()
    wf = retry_failed_workflow(calls, {"down": False})
    assert run(durable.run_workflow(wf, world=world, run_id="r")) == 42
    before = types(world, "r")

    assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == 42
    assert types(world, "r") == before


def test_retry_failed_gives_a_retry_policy_a_fresh_round_of_attempts(worlds: Worlds) -> None:
    """After run.retried, a step that had used up its attempts gets max_attempts again."""
    calls = Counter[str]()
    state = {"down": True}

    @durable.step(retry=RetryPolicy(max_attempts=2, backoff=0))
    async def call() -> str:
        calls["call"] += 1
        if state["down"] or calls["call"] < 4:
            raise ConnectionError(f"down at attempt {calls['call']}")
        return "up"

    @durable.workflow
    async def wf() -> str:
        return await call()

    with pytest.raises(ConnectionError, match="attempt 2"):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    state["down"] = False
    world = worlds.open()
    assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == "up"
    decisions = [(e.attempt, e.decision) for e in world.events("r") if e.type == "retry.decision"]  # type: ignore[union-attr]
    assert decisions == [(1, "retry"), (2, "give_up"), (1, "retry")]
    assert calls["call"] == 4
