"""The operation backend: each pydantic-ai operation one durable call of the running run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from pydantic_ai.durable_exec import (
    CallableOperationBackend,
    DurableOperationId,
    EventStreamHandlerId,
    ModelCancelSuspendedResponseId,
    ModelCompactMessagesId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.tools import RunContext
from pydantic_core import to_jsonable_python

import durable

from .._effects import run_effect
from ._names import _part
from ._options import ToolOptions, reconcile_option

VOLATILE_FIELDS = frozenset({"timestamp", "run_id", "conversation_id"})
"""Message fields left out of a model request's identity: they differ on every run."""


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=lambda v: type(v).__qualname__)


def without_volatile(value: Any) -> Any:
    """``value`` (JSON data) without the keys in ``VOLATILE_FIELDS``, at any depth."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE_FIELDS}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def request_identity(model_id: str | None, messages: Any, settings: Any, parameters: Any) -> dict[str, Any]:
    """A model request's identity: the model, the conversation without volatile fields, settings, tools."""
    return {
        "model": model_id,
        "messages": without_volatile(ModelMessagesTypeAdapter.dump_python(messages, mode="json")),
        "settings": _jsonable(settings),
        "parameters": without_volatile(_jsonable(parameters)),
    }


class _Backend(CallableOperationBackend[ToolOptions]):
    """Runs each pydantic-ai operation as one durable call of the running durable run."""

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: ToolOptions,
    ) -> object:
        """Execute ``body`` as the durable call ``name`` (recorded once, replayed on resume)."""
        match operation_id:
            case ModelRequestId(model_id=model_id):
                _, messages, settings, parameters, _ctx = cache_key
                identity = request_identity(model_id, messages, settings, parameters)
                return await run_effect("model", name, body, request=identity)
            case ModelCompactMessagesId():
                return await run_effect("model", name, body, request=_jsonable(cache_key[1:3]))
            case ToolsetCallToolId():
                tool_name, args, ctx = cache_key[0], cache_key[1], cast(RunContext[Any], cache_key[2])
                async with durable.branch(ctx.tool_call_id, name=f"turn-{ctx.run_step}"):
                    return await run_effect(
                        "tool",
                        name,
                        body,
                        idempotent=bool(config.get("idempotent", False)),
                        reconcile=reconcile_option(config),
                        tool=str(tool_name),
                        args=_jsonable(args),
                    )
            case ToolsetGetToolsId(toolset_id=toolset_id) | ToolsetGetInstructionsId(toolset_id=toolset_id):
                ctx = cast(RunContext[Any], cache_key[0])
                async with durable.branch(_part(toolset_id), name=f"tools-{ctx.run_step}"):
                    return await run_effect("tool", name, body, idempotent=True, toolset=toolset_id)
            case ToolsetValidateToolArgumentsId() | EventStreamHandlerId():
                return await body()  # pure, or delivered in the run itself: nothing to record
            case ModelCancelSuspendedResponseId():
                return await run_effect("tool", name, body, idempotent=True, response=_jsonable(cache_key[1]))
            case _:  # a capability's own durable operation (or one added in a later release)
                return await run_effect(
                    "tool",
                    name,
                    body,
                    idempotent=bool(config.get("idempotent", False)),
                    reconcile=reconcile_option(config),
                    arguments=without_volatile(_jsonable(cache_key[:-1])),
                )
