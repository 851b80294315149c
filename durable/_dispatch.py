"""Where a decorated call goes inside a run: step, effect, stream, retry loop or child run.

``DurableFunction`` hands every call made inside a run to ``dispatch``; this
module is the only one that knows every kind of durable call, so the modules
it routes to stay independent of each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._attempts import effect_with_retry, step_with_retry
from ._context import CURRENT, EFFECT_KEY
from ._engine import (
    _REPLAYED,
    _effect_async,
    _effect_begin,
    _effect_sync,
    _receipt_error,
    _receipt_ok,
    _step_async,
    _step_sync,
)
from ._runner import drive
from ._spec import Spec
from ._streams import stream_effect
from ._subruns import child_of_effect
from .errors import ConfigurationError


async def _child_workflow(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if EFFECT_KEY.get() is not None and CURRENT.get().busy is not None:  # type: ignore[union-attr]
        return await child_of_effect(spec, args, kwargs)  # inside a tool body: the tool brackets it
    parent_id = CURRENT.get().run.run_id  # type: ignore[union-attr]
    call, replayed = _effect_begin(spec, args, kwargs, child_run_id=lambda key: f"{parent_id}:{key}")
    if call is _REPLAYED:
        return replayed
    run = call.run
    try:
        if call.mode == "call":
            await run.flush_async()
        value = args[0] if args else (next(iter(kwargs.values())) if kwargs else None)
        result = await drive(
            spec,
            value,
            run.world,
            run_id=f"{run.run_id}:{call.key}",
            models=run.models,
            parent=(run.run_id, call.key),
        )
        _receipt_ok(call, result)
    except BaseException as exc:
        if _receipt_error(call, exc):
            await run.flush_async()
        raise
    finally:
        call.scope.busy = None
    run.flush_soon()
    return result


def dispatch(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run one decorated call inside the current run (called by ``DurableFunction``)."""
    kind = spec.kind
    if spec.retry is not None:  # async only: validated at decoration time
        if kind == "step":
            return step_with_retry(spec, fn, args, kwargs)
        return effect_with_retry(spec, fn, args, kwargs)
    if kind == "step":
        if spec.is_async:
            return _step_async(spec, fn, args, kwargs)
        return _step_sync(spec, fn, args, kwargs)
    if kind == "workflow":
        if not spec.is_async:
            raise ConfigurationError(
                f"@workflow {spec.name!r} is sync; a workflow called inside another run starts a "
                "child run, which needs an async def."
            )
        return _child_workflow(spec, fn, args, kwargs)
    if spec.is_asyncgen:
        return stream_effect(spec, fn, args, kwargs)
    if spec.is_async:
        return _effect_async(spec, fn, args, kwargs)
    return _effect_sync(spec, fn, args, kwargs)
