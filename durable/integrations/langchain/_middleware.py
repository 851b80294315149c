"""``DurableMiddleware()``: every model and tool call of a ``create_agent`` agent durable in one line.

LangChain's agent middleware wraps each model call (``wrap_model_call`` /
``awrap_model_call``) and each tool call (``wrap_tool_call`` /
``awrap_tool_call``) of the agent's graph. Inside a run the model of the
request is made durable (``wrap``: the same record as a model wrapped by
hand), and a tool call becomes a recorded tool call keyed by its
``tool_call_id`` inside the task that runs it, its result the ``ToolMessage``
or ``Command`` the tool node made. A tool made with ``wrap_tool`` records its
own calls with its own options, and is not recorded twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool

import durable

from .._effects import in_run
from .._from_threads import current_run, on_loop_thread, on_run_loop
from .._graph_tasks import Described, describe_once, graph_call, graph_call_sync, passing_controls
from .._manifest import described_value
from ._messages import Live, jsonable, rebuilt_tool_result
from ._model import wrap
from ._tool import DurableTool, call_identity, call_name, described, options_of, recorder, tool_body

_OPTIONS = frozenset({"idempotent", "reconcile", "compensate"})


def _agent_name() -> str:
    config = var_child_runnable_config.get() or {}
    name = (config.get("metadata") or {}).get("lc_agent_name")
    return str(name) if name else "agent"


class DurableMiddleware(AgentMiddleware):
    """Agent middleware that makes every model and tool call of a ``create_agent`` agent durable.

    ``create_agent(model, tools, middleware=[DurableMiddleware()])``, then
    ``await agent.ainvoke(...)`` inside a ``@durable.workflow``: each model call
    is a recorded model call and each tool call a recorded tool call keyed by
    its ``tool_call_id``, so a resume re-sends only the call a crash cut. The
    agent's name, its tools (names, argument schemas, options) and its model
    enter the run's manifest at its first model call: a resume whose agent
    changed fails closed with ``CapabilityDriftError``. Outside a run it
    changes nothing. Put it last in ``middleware=``: middleware before it
    (retries, fallbacks, summaries) then wraps durable calls, and each real
    call is recorded once.

    Args:
        tools: Durable options per tool name: ``{"charge": {"idempotent": True}}``
            (``idempotent``, ``reconcile``, ``compensate``, as ``wrap_tool`` takes
            them). A tool without options is a plain tool: a call a crash cut
            fails closed. A tool made with ``wrap_tool`` keeps its own options.

    Raises:
        ConfigurationError: An option that is none of those.

    Example:
        >>> from durable.integrations.langchain import DurableMiddleware
        >>> DurableMiddleware(tools={"charge": {"idempotent": True}}).name
        'DurableMiddleware'
    """

    def __init__(self, tools: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__()
        self._tools: dict[str, dict[str, Any]] = {}
        for name, options in (tools or {}).items():
            unknown = set(options) - _OPTIONS
            if unknown:
                raise durable.ConfigurationError(
                    f"DurableMiddleware(tools=...) gives tool {name!r} the unknown option(s) "
                    f"{sorted(unknown)}; a tool's durable options are {sorted(_OPTIONS)}."
                )
            self._tools[str(name)] = dict(options)

    # -- the manifest --------------------------------------------------------------------

    def _described(self, request: Any) -> Described:
        entries: list[Any] = []
        for tool in request.tools or ():
            if isinstance(tool, BaseTool):
                own = tool.durable_options if isinstance(tool, DurableTool) else self._tools.get(tool.name)
                entries.append(described(tool, own or {}))
            elif isinstance(tool, Mapping):  # a provider's built-in tool, given as a dict
                name = tool.get("name") or tool.get("type")
                entries.append(described_value(f"tool__{name}", jsonable(tool)))
        model = request.model
        entries.append(described_value("model", {"class": type(model).__qualname__}))
        return _agent_name(), entries

    def _describe(self, request: Any) -> None:
        what = self._described(request)
        run = current_run()
        if run is None or on_loop_thread(run):
            describe_once(what)
            return

        async def on_loop(_: Any) -> None:
            describe_once(what)

        on_run_loop(run, on_loop, what="the agent's manifest")

    # -- model calls ---------------------------------------------------------------------

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Make the request's model durable (``wrap``) inside a run, then call it."""
        if in_run():
            wrap(request.model)
            self._describe(request)
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Make the request's model durable (``wrap``) inside a run, then call it."""
        if in_run():
            wrap(request.model)
            self._describe(request)
        return await handler(request)

    # -- tool calls ----------------------------------------------------------------------

    def _tool_call(self, request: Any) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        tool = request.tool
        if not in_run() or isinstance(tool, DurableTool):
            return None
        name = str(request.tool_call["name"])
        known = tool if isinstance(tool, BaseTool) else None
        _, identity = call_identity(known, name, {**request.tool_call, "type": "tool_call"})
        options = options_of(known, self._tools.get(name, {})) if known is not None else {}
        return name, identity, options

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Inside a run, the tool call as a recorded tool call keyed by its ``tool_call_id``."""
        parts = self._tool_call(request)
        if parts is None:
            return handler(request)
        name, identity, options = parts
        result = Live(recorder(name), rebuilt_tool_result)
        with passing_controls():
            payload = graph_call_sync(
                "tool",
                call_name(name),
                lambda: result.ran(handler(request)),
                call_id=identity["call"],
                **options,
                **identity,
            )
        return result.of(payload)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Inside a run, the tool call as a recorded tool call keyed by its ``tool_call_id``."""
        parts = self._tool_call(request)
        if parts is None:
            return await handler(request)
        name, identity, options = parts
        result = Live(recorder(name), rebuilt_tool_result)

        async def body() -> Any:
            async with tool_body(request.tool):
                return result.ran(await handler(request))

        with passing_controls():
            payload = await graph_call(
                "tool", call_name(name), body, call_id=identity["call"], **options, **identity
            )
        return result.of(payload)
