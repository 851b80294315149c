"""The capability: ``Durability()``, which opens a session and hands pydantic-ai its backend."""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from contextlib import AsyncExitStack
from contextvars import ContextVar
from typing import Any, cast

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities import ProcessEventStream
from pydantic_ai.capabilities.abstract import WrapModelRequestHandler, WrapRunHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    DurableOperationBackend,
    DurableOperationId,
    RoleBasedOperationConfig,
)
from pydantic_ai.messages import AgentStreamEvent, ModelResponse
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext

import durable

from ...engine import effect_body_scope, in_effect_body
from .._effects import in_run
from .._manifest import name_part as _part
from ._backend import _Backend
from ._live_stream import LiveStreams
from ._manifest import manifest_tools
from ._names import DurabilityNamer
from ._options import ToolOptions
from ._tool_results import return_types

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
        live_streams: Stream a streamed request's events to the run as they arrive, recorded one
            by one (``<agent>__model_stream``). ``False`` records a streamed request when it is
            complete, as releases before this option did (``<agent>__model_request_stream``), for
            runs started by such a release.

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
        live_streams: bool = True,
    ) -> None:
        # The handler is run on the run's own event stream, never inside a durable call, so
        # it sees the same events on a replay as on the first run.
        super().__init__(models=models, event_stream_handler=None, name=name)
        self._handler = ProcessEventStream(event_stream_handler) if event_stream_handler else None
        self._live_streams = live_streams

    async def wrap_model_request(
        self,
        ctx: RunContext[AgentDepsT],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        """pydantic-ai's durable model, its streamed requests made live (``LiveStreams``)."""
        if not self._live_streams or not self.in_durable_context:
            return await super().wrap_model_request(ctx, request_context=request_context, handler=handler)

        async def live(inner: ModelRequestContext) -> ModelResponse:
            model_id = self._model_id_for_request(ctx, inner)
            namer = DurabilityNamer(self.name, default_model_id=self.default_model_id or "default")
            inner.model = LiveStreams(inner.model, name=namer.live_stream_name(model_id), model_id=model_id)
            return await handler(inner)

        return await super().wrap_model_request(ctx, request_context=request_context, handler=live)

    def get_model(self) -> Any:
        """No model of its own: an agent built without one takes the run's (``run(model=...)``).

        Overriding it tells pydantic-ai that the agent's model may come at run time,
        so ``Agent(name=..., capabilities=[Durability()])`` can be built without one.
        """
        return None

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

        found: list[dict[str, Any]] = []

        def returns(tool_name: str) -> Any:
            if not found:  # asked only on a replay: the agent's tools are read once, then
                found.append(return_types(list(self.agent.toolsets) if self.agent is not None else []))
            return found[0].get(tool_name)

        return _Backend(
            namer=DurabilityNamer(self.name, default_model_id=self.default_model_id or "default"),
            config=RoleBasedOperationConfig(
                model=base, event=base, capability=base, tool=base, resolve_tool=tool_options
            ),
            returns=returns,
        )

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Run the agent inside ``durable.session(<agent name>)``, whose manifest lists its tools.

        A delegate (an agent run inside a tool call of another durable agent) records
        its calls in that tool call's own scope, so a kill inside it runs again only
        the call it cut: the tool is called again and the delegate's calls replay.
        """
        if in_effect_body():
            async with effect_body_scope():
                token = _SESSION_OPEN.set(False)  # the delegate opens a session of its own
                try:
                    return await self.wrap_run(ctx, handler=handler)
                finally:
                    _SESSION_OPEN.reset(token)
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
