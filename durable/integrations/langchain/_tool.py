"""``wrap_tool(tool, ...)``: a LangChain tool whose calls are recorded tool calls inside a run.

As ``wrap`` does for a model, the tool object's class is swapped for a
subclass (one per class and options) overriding ``invoke`` and ``ainvoke``,
the two methods LangGraph's tool node and every caller use. Called with a
tool call (``{"name", "args", "id", "type": "tool_call"}``) the call is keyed
by its ``tool_call_id`` inside the task that made it; called with plain
arguments, by its place in the current scope. The recorded result is the
tool's ``ToolMessage`` (or the ``Command`` or content it returned), so a
replay hands LangGraph exactly what the first call did.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, TypeVar, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel

import durable

from ...engine import EFFECT_KEY, effect_body_scope
from .._effects import in_run, undo_tool
from .._graph_tasks import graph_call, graph_call_sync, passing_controls
from .._manifest import described_tool, name_part
from ._messages import CONTENT, MESSAGE, Live, jsonable, rebuilt_tool_result, tool_result

T = TypeVar("T")

_CLASSES: dict[tuple[Any, ...], type] = {}
_RECONCILES: dict[tuple[str, Any], Any] = {}
_UNDOS: dict[tuple[str, Any], Any] = {}


def call_name(tool_name: str) -> str:
    """The durable call name of a LangChain tool: ``langchain__tool__<name>``."""
    return f"langchain__tool__{name_part(tool_name)}"


def schema_of(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the arguments the model gives ``tool`` (injected arguments left out)."""
    schema: Any = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return dict(schema) if isinstance(schema, Mapping) else {}


def call_identity(tool: BaseTool | None, name: str, input: Any) -> tuple[str | None, dict[str, Any]]:
    """A tool call's id (``None`` for plain arguments) and its identity: name, arguments, id.

    The arguments are the ones the model gave: those LangGraph injects (the
    state, the runtime) are not in the tool's call schema and are left out.
    """
    call_id = None
    args: Any = input
    if isinstance(input, Mapping) and input.get("type") == "tool_call":
        call_id = str(input.get("id")) if input.get("id") is not None else None
        args = input.get("args", {})
    if not isinstance(args, Mapping):
        return call_id, {"tool": name, "args": jsonable({"input": args}), "call": call_id}
    known = set((schema_of(tool).get("properties") or {}).keys()) if tool is not None else set()
    given = {k: v for k, v in args.items() if not known or k in known}
    return call_id, {"tool": name, "args": jsonable(given), "call": call_id}


def _content(payload: Any) -> Any:
    if isinstance(payload, Mapping) and MESSAGE in payload:
        return payload[MESSAGE]["data"].get("content")
    if isinstance(payload, Mapping) and CONTENT in payload:
        return payload[CONTENT]
    return payload


def reconcile_option(tool_name: str, reconcile: Any) -> Any:
    """The ``reconcile=`` of a tool's call: asks ``reconcile(key, {"tool", "args"})`` for its result.

    What ``reconcile`` returns is the tool's content (a ``ToolMessage`` is
    taken as is); ``NEVER_HAPPENED`` says the call did not happen.
    """
    if reconcile is None:
        return None
    made = _RECONCILES.get((tool_name, reconcile))
    if made is None:

        def ask(key: str, identity: dict[str, Any]) -> Any:
            answer = reconcile(key, {"tool": identity.get("tool"), "args": identity.get("args")})
            if answer is durable.NEVER_HAPPENED:
                return answer
            if not isinstance(answer, ToolMessage) and identity.get("call") is not None:
                answer = ToolMessage(content=answer, tool_call_id=identity["call"], name=tool_name)
            return tool_result(answer, f"reconcile= of tool {tool_name!r}")

        ask.__qualname__ = getattr(reconcile, "__qualname__", "reconcile")
        made = _RECONCILES[(tool_name, reconcile)] = ask
    return made


def compensate_option(tool_name: str, compensate: Any) -> Any:
    """The ``compensate=`` of a tool's call: ``compensate`` called with its arguments and ``result=``.

    ``compensate`` is a LangChain tool (given ``{**args, "result": content}``)
    or a function, sync or async (called with ``**args, result=content``).
    """
    if compensate is None:
        return None
    made = _UNDOS.get((tool_name, compensate))
    if made is None:

        async def undo(identity: dict[str, Any], result: Any) -> Any:
            args = dict(identity.get("args") or {})
            content = _content(result)
            if isinstance(compensate, BaseTool):
                out = await compensate.ainvoke({**args, "result": content})
            else:
                out = compensate(**args, result=content)
                if inspect.isawaitable(out):
                    out = await out
            return jsonable(out.content if isinstance(out, ToolMessage) else out)

        made = _UNDOS[(tool_name, compensate)] = undo_tool(f"langchain__undo__{name_part(tool_name)}", undo)
    return made


def options_of(tool: BaseTool, options: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's durable options as ``run_effect`` takes them."""
    return {
        "idempotent": bool(options.get("idempotent", False)),
        "reconcile": reconcile_option(tool.name, options.get("reconcile")),
        "compensate": compensate_option(tool.name, options.get("compensate")),
    }


def described(tool: BaseTool, options: Mapping[str, Any]) -> Any:
    """The session manifest's stand-in for ``tool``: its name, argument schema and options."""
    return described_tool(tool.name, schema_of(tool), "langchain tool", options_of(tool, options))


_RUNNING: ContextVar[Any] = ContextVar("durable_langchain_tool_body", default=None)
"""The tool whose body runs here: its own methods, called by LangChain inside it, just run."""


@asynccontextmanager
async def tool_body(tool: Any) -> AsyncIterator[None]:
    """The body of a recorded tool call: the tool's own code, with its idempotency key.

    Durable calls the tool makes (a wrapped model, ``durable.interrupt``, a
    ``@durable.tool``) are recorded in a scope of their own below the call
    (``effect_body_scope``), so a call cut while it waited on them runs again
    and they replay; ``durable.idempotency_key()`` still answers the call's key.
    """
    key = EFFECT_KEY.get()
    async with effect_body_scope():
        kept, running = EFFECT_KEY.set(key), _RUNNING.set(tool)
        try:
            yield
        finally:
            _RUNNING.reset(running)
            EFFECT_KEY.reset(kept)


def _rebuilt(payload: Any) -> Any:
    return rebuilt_tool_result(dict(payload)) if isinstance(payload, Mapping) else payload


def recorder(tool_name: str) -> Callable[[Any], dict[str, Any]]:
    """What the log records of a tool's result (a ``ToolMessage``, a ``Command``, content)."""
    return lambda value: tool_result(value, f"tool {tool_name!r}")


class DurableTool:
    """The overrides a wrapped tool's class gets (see ``wrap_tool``)."""

    durable_options: ClassVar[dict[str, Any]] = {}

    def _durable_call(self, input: Any) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
        tool = cast(BaseTool, self)
        call_id, identity = call_identity(tool, tool.name, input)
        return call_id, identity, options_of(tool, self.durable_options)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """``BaseTool.invoke``, a recorded tool call inside a run."""
        parent: Any = super()
        if not in_run() or _RUNNING.get() is self:
            return parent.invoke(input, config, **kwargs)
        tool = cast(BaseTool, self)
        call_id, identity, options = self._durable_call(input)
        result = Live(recorder(tool.name), _rebuilt)

        with passing_controls():
            payload = graph_call_sync(
                "tool",
                call_name(tool.name),
                lambda: result.ran(parent.invoke(input, config, **kwargs)),
                call_id=call_id,
                described=(tool.name, [described(tool, self.durable_options)]),
                **options,
                **identity,
            )
        return result.of(payload)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """``BaseTool.ainvoke``, a recorded tool call inside a run."""
        parent: Any = super()
        if not in_run() or _RUNNING.get() is self:
            return await parent.ainvoke(input, config, **kwargs)
        tool = cast(BaseTool, self)
        call_id, identity, options = self._durable_call(input)
        result = Live(recorder(tool.name), _rebuilt)

        async def body() -> Any:
            async with tool_body(tool):
                return result.ran(await parent.ainvoke(input, config, **kwargs))

        with passing_controls():
            payload = await graph_call(
                "tool",
                call_name(tool.name),
                body,
                call_id=call_id,
                described=(tool.name, [described(tool, self.durable_options)]),
                **options,
                **identity,
            )
        return result.of(payload)


def wrap_tool(
    tool: T,
    *,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None,
    compensate: Any = None,
) -> T:
    """Make a LangChain tool's calls recorded tool calls inside a durable run.

    Each call is a ``@durable.tool``: its intent is durable before the tool
    runs and its result (the ``ToolMessage``, ``Command`` or content the tool
    returned) is recorded, so a resume replays it. A call made with a tool
    call (as LangGraph's tool node makes it) is keyed by its ``tool_call_id``
    inside the task that made it. A plain tool is an effect that must not run
    twice: a call a crash cut (an intent without a receipt) fails closed with
    ``UnknownCommitError`` (the run is ``blocked`` under a worker), unless it
    is ``idempotent`` or ``reconcile`` says what happened.
    ``durable.idempotency_key()`` works inside the tool. Outside a run the tool
    is untouched.

    The object itself is made durable and returned; wrapping it again replaces
    its options. Its name, argument schema and options enter the run's
    manifest at its first call: a resume whose tool has another schema or
    other options fails closed with ``CapabilityDriftError``.

    Args:
        tool: A LangChain ``BaseTool`` (``@tool`` functions are ones).
        idempotent: Safe to call again with the same ``durable.idempotency_key()``
            after a crash cut a call.
        reconcile: ``reconcile(idempotency_key, {"tool": name, "args": args})``,
            asked after such a crash: the call's content if it happened, or
            ``durable.NEVER_HAPPENED``.
        compensate: Undoes a confirmed call when the run fails for good or is
            cancelled: a tool given ``{**args, "result": content}``, or a function
            called with ``**args, result=content``.

    Returns:
        The same object.

    Raises:
        ConfigurationError: ``tool`` is no LangChain tool.

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     "Add two numbers."
        ...     return a + b
        >>> wrap_tool(add, idempotent=True).invoke({"a": 1, "b": 2})  # outside a run: a plain call
        3
    """
    if not isinstance(tool, BaseTool):
        raise durable.ConfigurationError(
            f"wrap_tool() takes a LangChain tool (a BaseTool, e.g. a @tool function), not "
            f"{type(tool).__qualname__}; wrap chat models with wrap()."
        )
    options = {"idempotent": bool(idempotent), "reconcile": reconcile, "compensate": compensate}
    base = type(tool).__mro__[2] if isinstance(tool, DurableTool) else type(tool)
    key = (base, options["idempotent"], reconcile, compensate)
    made = _CLASSES.get(key)
    if made is None:
        meta: Any = type(base)  # pydantic's metaclass makes the subclass
        made = _CLASSES[key] = meta(
            f"Durable{base.__name__}",
            (DurableTool, base),
            {
                "__module__": base.__module__,
                "__annotations__": {"durable_options": ClassVar[dict[str, Any]]},
                "durable_options": options,
            },
        )
    object.__setattr__(tool, "__class__", made)
    return tool


def tool_options(tool: Any) -> dict[str, Any] | None:
    """The options ``wrap_tool`` gave ``tool``, or ``None`` for a tool it did not wrap."""
    return dict(tool.durable_options) if isinstance(tool, DurableTool) else None
