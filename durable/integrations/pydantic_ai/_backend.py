"""The operation backend: each pydantic-ai operation one durable call of the running run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from pydantic_ai.durable_exec import (
    BoundDurableOperation,
    CallableOperationBackend,
    DurableOperation,
    DurableOperationConfig,
    DurableOperationId,
    DurableOperationNamer,
    EventStreamHandlerId,
    ModelCancelSuspendedResponseId,
    ModelCompactMessagesId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
    durable_unit_scope,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.tools import RunContext
from pydantic_core import to_jsonable_python

import durable

from .._effects import run_effect
from .._manifest import name_part as _part
from ._options import ToolOptions, reconcile_option
from ._tool_results import USAGE_ADDED, ReturnTypes, add_usage, rebuilt, usage_added, usage_counts

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


class _Bound(BoundDurableOperation[Any, Any, Any]):
    """One operation bound to the backend: calling it runs ``dispatch``."""

    def __init__(self, operation: DurableOperation[Any, Any, Any], dispatch: Callable[..., Any]) -> None:
        self._operation = operation
        self._dispatch = dispatch

    @property
    def operation(self) -> DurableOperation[Any, Any, Any]:
        """The operation."""
        return self._operation

    async def __call__(self, params: Any, *, config: object | None = None) -> Any:
        """Run the operation as a durable call."""
        return await self._dispatch(params, config)


class _Backend(CallableOperationBackend[ToolOptions]):
    """Runs each pydantic-ai operation as one durable call of the running durable run.

    A call that runs hands pydantic-ai the value its operation returned, as a
    plain run does; only a replayed call is rebuilt from its JSON record (a tool's
    value as the tool's return annotation).
    """

    def __init__(
        self,
        *,
        namer: DurableOperationNamer,
        config: DurableOperationConfig[ToolOptions],
        returns: ReturnTypes,
    ) -> None:
        super().__init__(namer=namer, config=config)
        self._names = namer
        self._configs = config
        self._returns = returns

    def bind(self, operation: DurableOperation[Any, Any, Any]) -> BoundDurableOperation[Any, Any, Any]:
        """The caller of one operation: a durable call named as the namer says."""

        async def dispatch(params: Any, explicit: object | None) -> Any:
            op_id = operation.operation_id
            label = operation.invocation_label(params) if operation.invocation_label is not None else None
            name = self._names.invocation_name(op_id, label=label).operation_name
            config = (
                cast(ToolOptions, explicit)
                if explicit is not None
                else self._configs.base(operation.config_role, operation_id=op_id)
            )
            cache_key = operation.cache_identity.project(params)
            live: list[Any] = []

            async def body() -> object:
                with durable_unit_scope():
                    value = await operation.handler(params)
                live.append(value)
                return operation.result_codec.dump(value)

            payload = await self.execute(
                operation_id=op_id, name=name, body=body, cache_key=cache_key, config=config
            )
            if live:  # ran here: the value itself, as outside a run
                return live[-1]
            if isinstance(op_id, ToolsetCallToolId):
                payload = rebuilt(payload, self._returns(str(cache_key[0])))
            return operation.result_codec.load(payload)

        return _Bound(operation, dispatch)

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
                ran = False

                async def counted() -> object:
                    # What the call adds to the run's usage (a delegate agent's requests and tokens).
                    nonlocal ran
                    ran = True
                    before = usage_counts(ctx.usage)
                    result = await body()
                    added = usage_added(before, ctx.usage)
                    return {**result, USAGE_ADDED: added} if added and isinstance(result, dict) else result

                async with durable.branch(ctx.tool_call_id, name=f"turn-{ctx.run_step}"):
                    payload = await run_effect(
                        "tool",
                        name,
                        counted,
                        idempotent=bool(config.get("idempotent", False)),
                        reconcile=reconcile_option(config),
                        tool=str(tool_name),
                        args=_jsonable(args),
                    )
                if isinstance(payload, dict) and USAGE_ADDED in payload:
                    payload = dict(payload)
                    added = payload.pop(USAGE_ADDED)
                    if not ran:  # replayed: the usage the call added once is added again
                        add_usage(ctx.usage, added)
                return payload
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
