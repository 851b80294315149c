"""Make a pydantic-ai ``Agent`` durable with one capability: ``Durability()``.

``Agent(model, name="support", capabilities=[Durability()])``, then
``await agent.run(...)`` (or ``run_stream``, ``iter``) inside a
``@durable.workflow``. Built on pydantic-ai's public durable-execution
extension API (``pydantic_ai.durable_exec``): the base capability routes every
model request, tool call and MCP listing through an operation backend, and
this module's backend makes each of them a durable call:

- a model request (streamed or not) is a ``@durable.model_call`` whose identity
  is the request without the fields that change on every run (timestamps, run
  and conversation ids); a streamed request replays its response as events;
- a tool call is a ``@durable.tool`` inside ``durable.branch(tool_call_id)``
  within its model turn, so the calls of one turn run in parallel and keep
  their keys; ``ModelRetry``, ``CallDeferred`` and approvals cross as values;
- an MCP server's ``get_tools`` / ``get_instructions`` and a dynamic toolset's
  listing are idempotent ``@durable.tool`` calls, so a replay sees the tools
  the first run saw;
- the run opens ``durable.session(<agent name>)`` whose manifest lists every
  function tool with its JSON schema and every toolset id, so a renamed tool or
  a changed schema fails the resume with ``CapabilityDriftError``.

Per-tool options come from tool metadata:
``metadata={"durable": {"idempotent": True, "reconcile": fn}}``. Outside a
durable run the capability is transparent.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, cast

from pydantic_ai import FunctionToolset
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities import ProcessEventStream
from pydantic_ai.capabilities.abstract import WrapRunHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    CallableOperationBackend,
    CapabilityOperationId,
    DurabilityEngineSpec,
    DurableOperationBackend,
    DurableOperationId,
    EventStreamHandlerId,
    JournalOperationNamer,
    ModelCancelSuspendedResponseId,
    ModelCompactMessagesId,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_ai.messages import AgentStreamEvent, ModelMessagesTypeAdapter
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.toolsets import AbstractToolset
from pydantic_core import to_jsonable_python

import durable

from ._effects import in_run, run_effect

__all__ = ["VOLATILE_FIELDS", "Durability", "DurabilityNamer", "ToolOptions", "tool_options"]

VOLATILE_FIELDS = frozenset({"timestamp", "run_id", "conversation_id"})
"""Message fields left out of a model request's identity: they differ on every run."""

ToolOptions = dict[str, Any]
"""A tool's durable options: ``{"idempotent": bool, "reconcile": fn}`` (from tool metadata)."""

_BAD = str.maketrans({c: "_" for c in ".[]#:/\\ <>"})


def _part(name: str) -> str:
    """``name`` made usable inside a durable call name (no ``. [ ] # : /``)."""
    return name.strip("<>").translate(_BAD) or "_"


class DurabilityNamer(JournalOperationNamer):
    """The persisted durable call names of an agent's operations.

    The names are compatibility data: a run records them, and a resume must
    produce the same ones. They never change between releases (a test pins them).
    ``support__model_request``, ``support__function_toolset__orders__call_tool``,
    ``support__mcp_server__files__get_tools`` and so on.
    """

    def __init__(self, agent_name: str, *, default_model_id: str = "default") -> None:
        super().__init__(agent_name, default_model_id=default_model_id)
        self._agent = _part(agent_name)

    def _model(self, model_id: str | None) -> str:
        return "" if model_id is None or model_id == self._default_model_id else f"__{_part(model_id)}"

    def operation_name(self, operation_id: DurableOperationId) -> str:
        """The persisted name of one operation."""
        a = self._agent
        match operation_id:
            case ModelRequestId(model_id=model_id, streaming=streaming):
                op = "model_request_stream" if streaming else "model_request"
                return f"{a}__{op}{self._model(model_id)}"
            case ModelCompactMessagesId(model_id=model_id):
                return f"{a}__model_compact_messages{self._model(model_id)}"
            case ModelCancelSuspendedResponseId(model_id=model_id):
                return f"{a}__model_cancel_suspended_response{self._model(model_id)}"
            case CapabilityOperationId(capability_id=capability_id, operation=operation):
                return f"{a}__capability__{_part(capability_id)}__{_part(operation)}"
            case EventStreamHandlerId():
                return f"{a}__event_stream_handler"
            case ToolsetGetToolsId(toolset_kind=kind, toolset_id=toolset_id):
                return f"{a}__{_toolset(kind)}__{_part(toolset_id)}__get_tools"
            case ToolsetGetInstructionsId(toolset_id=toolset_id):
                return f"{a}__mcp_server__{_part(toolset_id)}__get_instructions"
            case ToolsetValidateToolArgumentsId(toolset_kind=kind, toolset_id=toolset_id):
                return f"{a}__{_toolset(kind)}__{_part(toolset_id)}__validate_args"
            case ToolsetCallToolId(toolset_kind=kind, toolset_id=toolset_id):
                return f"{a}__{_toolset(kind)}__{_part(toolset_id)}__call_tool"
            case _:  # the union grows in minor releases; a new operation keeps a stable name
                return f"{a}__{_part(type(operation_id).__name__)}"

    def invocation_name(self, operation_id: DurableOperationId, *, label: str | None) -> Any:
        """The name of one call: a tool call adds the tool's name."""
        name = self.operation_name(operation_id)
        if isinstance(operation_id, ToolsetCallToolId) and label is not None:
            name = f"{name}__{_part(label)}"
        return replace(super().invocation_name(operation_id, label=label), operation_name=name)


def _toolset(kind: str) -> str:
    return "mcp_server" if kind == "mcp" else f"{kind}_toolset"


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


def _reconciler(fn: Callable[[str, dict[str, Any]], Any]) -> Callable[[str, dict[str, Any]], Any]:
    """Adapt a user's ``reconcile(key, input)`` to the recorded tool-call payload."""

    def reconcile(key: str, inp: dict[str, Any]) -> Any:
        outcome = fn(key, inp)
        if outcome is durable.NEVER_HAPPENED:
            return outcome
        # The recorded shape of a tool's return value (pydantic-ai's ``CallToolResult``, kind "tool_return").
        return {"kind": "tool_return", "result": _jsonable(outcome)}

    reconcile.__qualname__ = getattr(fn, "__qualname__", "reconcile")
    return reconcile


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
                        reconcile=_reconcile_option(config),
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
                    reconcile=_reconcile_option(config),
                    arguments=without_volatile(_jsonable(cache_key[:-1])),
                )


_RECONCILERS: dict[Any, Callable[[str, dict[str, Any]], Any]] = {}


def _reconcile_option(config: ToolOptions) -> Callable[[str, dict[str, Any]], Any] | None:
    fn = config.get("reconcile")
    if fn is None:
        return None
    if fn not in _RECONCILERS:
        _RECONCILERS[fn] = _reconciler(fn)
    return _RECONCILERS[fn]


# -- the manifest: agent name, toolset ids and tool schemas --------------------


class _Shown:
    """An annotation that shows as the given text in a signature."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _described_tool(name: str, schema: Mapping[str, Any] | None, where: str) -> Any:
    """A ``@durable.tool`` that only describes a pydantic-ai tool for the session manifest.

    Its signature reads as the tool's JSON schema, one keyword per property, so a
    changed schema shows in the drift report as ``availableTools[i].signature``.
    """
    props = dict((schema or {}).get("properties") or {})
    required = set((schema or {}).get("required") or ())
    params = [
        inspect.Parameter(
            p if p.isidentifier() else "_" + "".join(c if c.isalnum() else "_" for c in p),
            inspect.Parameter.KEYWORD_ONLY,
            annotation=_Shown(json.dumps(sub, sort_keys=True, separators=(",", ":"))),
            default=inspect.Parameter.empty if p in required else _Shown("optional"),
        )
        for p, sub in sorted(props.items())
    ]

    def described(**kwargs: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - a description, never called

    described.__signature__ = inspect.Signature(params, return_annotation=_Shown(where))  # type: ignore[attr-defined]
    return durable.tool(name=_part(name))(described)


def manifest_tools(toolsets: list[AbstractToolset[Any]]) -> list[Any]:
    """The described tools of an agent's leaf toolsets: each function tool, and each other toolset's id."""
    described: dict[str, Any] = {}

    def visit(ts: AbstractToolset[Any]) -> None:
        ts_id = ts.id or "<unnamed>"
        if isinstance(ts, FunctionToolset):
            for tool_name, tool in ts.tools.items():
                where = f"function_toolset {ts_id}"
                described[tool_name] = _described_tool(tool_name, tool.tool_def.parameters_json_schema, where)
        else:
            kind = type(ts).__name__
            described[f"{kind}__{ts_id}"] = _described_tool(f"{kind}__{ts_id}", None, f"toolset {ts_id}")

    for toolset in toolsets:
        toolset.apply(visit)
    return [described[k] for k in sorted(described)]


# -- the capability ---------------------------------------------------------------

_SESSION_OPEN: ContextVar[bool] = ContextVar("durable_pydantic_ai_session", default=False)


class Durability(BaseDurabilityCapability[AgentDepsT]):
    """A pydantic-ai capability that makes an agent's runs durable inside a ``@durable.workflow``.

    Use it as ``Agent(model, name="support", capabilities=[Durability()])`` and
    call ``await agent.run(...)`` (``run_stream``, ``iter``) inside a workflow.
    Each run opens the session ``<agent name>``; model requests are recorded
    ``@durable.model_call`` calls, tool calls ``@durable.tool`` calls keyed by their
    ``tool_call_id``, MCP listings are recorded. Outside a run it changes nothing.

    Keep stable across a resume: the agent's name, the toolset ids, the tool names
    and their schemas (a change fails closed with ``CapabilityDriftError``).

    Args:
        models: Extra models by id, for ``agent.run(model=...)`` (as in pydantic-ai's engines).
        event_stream_handler: Sees every event of a run, the replayed ones as well as new ones.
        name: The name in the durable call names (default: the agent's ``name``).

    Example:
        >>> import asyncio
        >>> from pydantic_ai import Agent
        >>> from pydantic_ai.models.test import TestModel
        >>> agent = Agent(TestModel(), name="support", capabilities=[Durability()])
        >>> asyncio.run(agent.run("hi")).output  # outside a run: a plain agent run
        'success (no tool calls)'
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="durable",
        durable_unit_noun="call",
        durable_container_noun="workflow",
        codec=JSON_CODEC,
        # A toolset given to run(toolsets=...) is not wrapped, so its calls would not be recorded.
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        sequential_tools_in_durable_context=False,
        tool_config_key="durable",
    )

    def __init__(
        self,
        *,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        name: str | None = None,
    ) -> None:
        # The handler is run on the run's own event stream, never inside a durable call, so
        # it sees the same events on a replay as on the first run.
        super().__init__(models=models, event_stream_handler=None, name=name)
        self._handler = ProcessEventStream(event_stream_handler) if event_stream_handler else None

    @property
    def in_durable_context(self) -> bool:
        """Whether the caller is inside a durable run."""
        return in_run()

    def get_durable_operation_backend(self) -> DurableOperationBackend[ToolOptions]:
        """The backend that makes each operation a durable call."""
        base: ToolOptions = {}

        def tool_options(operation_id: DurableOperationId, tool: object, tool_name: str) -> Any:
            del operation_id
            return self._build_resolve_tool_config(base)(cast(Any, tool), tool_name)

        return _Backend(
            namer=DurabilityNamer(self.name, default_model_id=self.default_model_id or "default"),
            config=RoleBasedOperationConfig(
                model=base, event=base, capability=base, tool=base, resolve_tool=tool_options
            ),
        )

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Run the agent inside ``durable.session(<agent name>)``, whose manifest lists its tools."""
        if not in_run() or _SESSION_OPEN.get():
            return await super().wrap_run(ctx, handler=handler)
        tools = manifest_tools(list(self.agent.toolsets) if self.agent is not None else [])
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(durable.session(_part(self.name), tools=tools))
            token = _SESSION_OPEN.set(True)
            try:
                return await super().wrap_run(ctx, handler=handler)
            finally:
                _SESSION_OPEN.reset(token)

    @property
    def has_wrap_run_event_stream(self) -> bool:
        """Whether an event stream handler was given."""
        return self._handler is not None

    async def wrap_run_event_stream(
        self, ctx: RunContext[AgentDepsT], *, stream: AsyncIterable[AgentStreamEvent]
    ) -> AsyncIterable[AgentStreamEvent]:
        """Hand every event of the run, replayed or new, to the event stream handler."""
        if self._handler is not None:
            stream = self._handler.wrap_run_event_stream(ctx, stream=stream)
        async for event in stream:
            yield event


def tool_options(
    idempotent: bool = False, reconcile: Callable[[str, dict[str, Any]], Any] | None = None
) -> dict[str, Any]:
    """Tool metadata that sets a tool's durable options: ``metadata=tool_options(idempotent=True)``.

    Args:
        idempotent: Safe to call again with the same ``durable.idempotency_key()`` after a crash.
        reconcile: Asked ``reconcile(key, input)`` after a crash whether the call happened.
    """
    options: dict[str, Any] = {"idempotent": idempotent}
    if reconcile is not None:
        options["reconcile"] = reconcile
    return {"durable": options}
