"""Where a decorated call goes inside a run: step, effect, stream, retry loop or child run.

``DurableFunction`` hands every call made inside a run to the handler that
``route`` chose for its function when it was decorated; this
module is the only one that knows every kind of durable call, so the modules
it routes to stay independent of each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ._child_runs import child_of_effect, drive_child
from ._claim import REPLAYED
from ._context import CURRENT
from ._decide import EXECUTE
from ._effects import EffectCall, confirm, effect_async, effect_begin, effect_sync, in_effect_body, start_span
from ._keys import child_run_id
from ._outbox_call import outbox_effect
from ._retry_loop import effect_with_retry, step_with_retry
from ._spec import Spec
from ._steps import step_async, step_sync
from ._streams import stream_effect


async def _child_workflow(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    scope = CURRENT.get()
    assert scope is not None  # dispatch runs only inside a run
    if in_effect_body(scope):
        return await child_of_effect(spec, args, kwargs)  # inside a tool body: the tool brackets it
    parent_id = scope.run.run_id
    with EffectCall(scope, spec.label) as claimed:
        call, replayed = effect_begin(
            spec, claimed, args, kwargs, child_run_id=lambda key: child_run_id(parent_id, key)
        )
        if call is REPLAYED:
            return replayed
        return await confirm(call, _drive_child(call, spec, args, kwargs))


async def _drive_child(call: EffectCall, spec: Spec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = call.run
    if call.action is EXECUTE:
        await run.flush_async()  # the intent (with the child's run id) is durable first
    value = args[0] if args else (next(iter(kwargs.values())) if kwargs else None)
    traced = None if run.tracer is None else start_span(call, 1)
    try:
        out = await drive_child(run, spec, value, child_run_id(run.run_id, call.key), call.key)
    except BaseException as exc:
        if traced is not None:
            traced.end(exc)
        raise
    if traced is not None:
        traced.span.set_attribute("durable.child_run_id", child_run_id(run.run_id, call.key))
        traced.end()
    return out


def _sync_child(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    raise ConfigurationError(
        f"@workflow {spec.name!r} is sync; a workflow called inside another run starts a "
        "child run, which needs an async def."
    )


Handler = Callable[[Spec, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
"""Runs one decorated call inside the current run: ``handler(spec, fn, args, kwargs)``."""


def route(spec: Spec) -> Handler:
    """The handler of every call of ``spec`` inside a run (chosen once, at decoration)."""
    kind = spec.kind
    if kind == "tool" and spec.outbox:  # the dispatcher applies retry=, not the run
        return outbox_effect
    if spec.retry is not None:  # async only: validated at decoration time
        return step_with_retry if kind == "step" else effect_with_retry
    if kind == "step":
        return step_async if spec.is_async else step_sync
    if kind == "workflow":
        return _child_workflow if spec.is_async else _sync_child
    if spec.is_asyncgen:
        return stream_effect
    return effect_async if spec.is_async else effect_sync


def dispatch(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run one decorated call inside the current run."""
    return route(spec)(spec, fn, args, kwargs)
