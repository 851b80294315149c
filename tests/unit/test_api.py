"""The public surface: exports, decorator shapes, signatures and misuse at decoration time."""

from __future__ import annotations

import asyncio
import inspect

import pytest

import durable
from durable import ConfigurationError


def test_all_is_sorted_and_complete() -> None:
    """__all__ is sorted, every name in it exists, and the contract names are there."""
    assert durable.__all__ == sorted(durable.__all__, key=lambda n: (not n.isupper(), n))
    for name in durable.__all__:
        assert hasattr(durable, name), name
    contract = {
        "workflow",
        "step",
        "tool",
        "model_call",
        "parallel",
        "branch",
        "run_workflow",
        "local_world",
        "memory_world",
    }
    assert contract <= set(durable.__all__)


def test_public_objects_report_the_durable_module() -> None:
    """Public classes and functions show `durable` as their module in reprs and tracebacks."""
    assert durable.run_workflow.__module__ == "durable"
    assert durable.UnknownCommitError.__module__ == "durable"


def test_every_public_class_and_function_reports_the_durable_module() -> None:
    """Wherever a public name is defined (the core, durable.store, durable.memory), it reports `durable`."""
    for name in durable.__all__:
        obj = getattr(durable, name)
        if isinstance(obj, type) or inspect.isfunction(obj) or isinstance(obj, durable.DurableFunction):
            assert obj.__module__ == "durable", name


@pytest.mark.parametrize("deco", [durable.workflow, durable.step, durable.tool, durable.model_call])
def test_decorators_work_bare_and_with_options(deco: object) -> None:
    """Each decorator works as @deco and @deco(name=...) and keeps the signature."""

    async def f(a: int, b: str = "x") -> str:
        """Doc."""
        return b * a

    bare = deco(f)  # type: ignore[operator]
    named = deco(name="other")(f)  # type: ignore[operator]
    for d in (bare, named):
        assert inspect.signature(d) == inspect.signature(f)
        assert d.__name__ == "f" and d.__doc__ == "Doc."
        assert inspect.iscoroutinefunction(d)
        assert asyncio.run(d(2, "y")) == "yy"  # outside a run: the plain function


def test_sync_function_stays_sync_outside_a_run() -> None:
    """A decorated sync function returns its value directly, not a coroutine."""

    @durable.tool
    def add(a: int, b: int) -> int:
        return a + b

    assert add(1, 2) == 3
    assert not inspect.iscoroutinefunction(add)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: durable.workflow(42), "function"),
        (lambda: durable.step(max_visits=0)(lambda: 1), "max_visits"),
        (lambda: durable.step(max_visits="3"), "max_visits"),
        (lambda: durable.tool(name="a.b")(lambda: 1), "name"),
        (lambda: durable.tool(reconcile=5)(lambda: 1), "reconcile"),
        (lambda: durable.model_call(slot="")(lambda: 1), "slot"),
        (lambda: durable.step(durable.step(lambda: 1)), "already decorated"),
    ],
)
def test_misuse_fails_at_decoration_time(make: object, message: str) -> None:
    """Misuse raises ConfigurationError when decorating, with a message that says what is wrong."""

    def attempt() -> None:
        obj = make()  # type: ignore[operator]
        if callable(obj) and not hasattr(obj, "_self_spec"):
            obj(lambda: 1)

    with pytest.raises(ConfigurationError, match=message):
        attempt()


def test_workflow_with_two_required_parameters_is_refused() -> None:
    """A workflow takes one input; other parameters need defaults."""
    with pytest.raises(ConfigurationError, match="one input"):

        @durable.workflow
        async def wf(a: int, b: int) -> int:
            return a + b


def test_run_workflow_refuses_undecorated_functions() -> None:
    """run_workflow needs a @workflow function."""

    async def plain() -> int:
        return 1

    with pytest.raises(ConfigurationError, match="@workflow"):
        asyncio.run(durable.run_workflow(plain, world=durable.memory_world()))


def test_idempotency_key_outside_a_run_is_none() -> None:
    """Outside a run a tool is a plain function: idempotency_key() is None, and the tool runs."""
    keys = []

    @durable.tool
    async def charge(cents: int) -> int:
        keys.append(durable.idempotency_key())
        return cents

    assert durable.idempotency_key() is None
    assert asyncio.run(charge(5)) == 5
    assert keys == [None]


def test_idempotency_key_in_a_run_outside_an_effect_is_an_error() -> None:
    """Inside a run, idempotency_key() outside a tool or model call body explains that it needs one."""

    @durable.step
    async def not_an_effect() -> str:
        return str(durable.idempotency_key())

    @durable.workflow
    async def wf() -> str:
        return await not_an_effect()

    with pytest.raises(ConfigurationError, match="@tool"):
        asyncio.run(durable.run_workflow(wf, world=durable.memory_world()))


def test_same_run_id_from_two_tasks_runs_the_body_once(world: durable.World) -> None:
    """Two concurrent callers of one run id: one drives, the other waits and gets the same output."""
    calls = []

    @durable.step
    async def slow() -> int:
        calls.append(1)
        for _ in range(20):
            await asyncio.sleep(0)
        return 42

    @durable.workflow
    async def wf() -> int:
        return await slow()

    async def both() -> list[int]:
        return list(
            await asyncio.gather(
                durable.run_workflow(wf, world=world, run_id="r"),
                durable.run_workflow(wf, world=world, run_id="r"),
            )
        )

    assert asyncio.run(both()) == [42, 42]
    assert calls == [1]


def test_timeout_leaves_the_run_resumable(world: durable.World) -> None:
    """A run that times out raises RunTimeoutError, and a later call finishes it."""
    gate = {"block": True}

    @durable.step
    async def wait() -> int:
        if gate["block"]:
            await asyncio.Event().wait()  # never set: only the timeout ends it
        return 1

    @durable.workflow
    async def wf() -> int:
        return await wait()

    with pytest.raises(durable.RunTimeoutError, match="resumable"):
        asyncio.run(durable.run_workflow(wf, world=world, run_id="r", timeout=0.05))
    gate["block"] = False
    assert asyncio.run(durable.run_workflow(wf, world=world, run_id="r")) == 1


def test_waiting_caller_honours_its_own_timeout(world: durable.World) -> None:
    """A second caller waiting for the run's lock gives up at its timeout; the first finishes."""
    release = asyncio.Event()

    @durable.step
    async def hold() -> int:
        await release.wait()
        return 7

    @durable.workflow
    async def wf() -> int:
        return await hold()

    async def scenario() -> tuple[int, BaseException | None]:
        first = asyncio.create_task(durable.run_workflow(wf, world=world, run_id="r"))
        for _ in range(3):  # let the first caller take the lock and start its step
            await asyncio.sleep(0)
        err: BaseException | None = None
        try:
            await durable.run_workflow(wf, world=world, run_id="r", timeout=0.05)
        except durable.RunTimeoutError as exc:
            err = exc
        release.set()
        return await first, err

    out, err = asyncio.run(scenario())
    assert out == 7
    assert isinstance(err, durable.RunTimeoutError)
