"""Every function tool call a durable tool call, keyed by its place in the model's response.

``wrap_tool(tool)`` replaces the ``FunctionTool``'s ``on_invoke_tool`` (in
place, once) with a function that, inside a run, makes the SDK's own invoker
(its failure handler included: the text a failing tool tells the model is
the call's outcome) the body of a ``@durable.tool`` call:

- its key is ``turn-<t>[<i>].tool:openai_agents__tool__<name>#0`` below the
  agent run's session: the ``i``-th function call of the run's ``t``-th model
  response, so the calls of one response run at once in scopes of their own
  and replay to the same keys whatever order they finish in;
- its identity is the tool's name and arguments;
- its outcome is the value the tool returned: recorded as JSON when JSON
  gives it back as itself (a string, a number, a dict), else as the text the
  model was sent (``str(value)``), so a replay sends the model the same input;
- an agent run inside the tool's body (an agent used as a tool, a tool that
  runs another agent) records its calls below the call, so a kill inside runs
  again only the call it cut; such a tool is called again after a crash (its
  own calls replay), and so is one marked ``idempotent``; the body sees the
  call's ``durable.idempotency_key()``;
- usage the body added to the run's ``Usage`` (a nested agent's requests and
  tokens) is added again when the call replays;
- a durable error (an unknown commit, a replay that left the log's path, a
  spent budget) passes the SDK's ``except Exception`` as ``Carried``.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from agents.tool import FunctionTool
from agents.usage import Usage
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

import durable

from ...engine import carried
from .._effects import in_run, run_effect
from ._names import mcp_call, tool_call
from ._options import options_of
from ._state import CURRENT_RUN
from ._tracing import replayed_call

WRAPPED = "__durable_wrapped__"
USAGE_ADDED = "usage_added"
_USAGE: TypeAdapter[Usage] = TypeAdapter(Usage)
_COUNTERS = ("requests", "input_tokens", "output_tokens", "total_tokens")


def encode_output(value: Any) -> dict[str, Any]:
    """A tool's value as its record: JSON when JSON gives it back as itself, else its text."""
    try:
        data = to_jsonable_python(value)
        if json.loads(json.dumps(data)) == value and str(data) == str(value):
            return {"value": data}
    except (TypeError, ValueError):
        pass
    return {"text": str(value)}


def decode_output(payload: Any) -> Any:
    """A recorded tool value: the JSON value itself, or the text the model was sent."""
    if isinstance(payload, dict):
        if "value" in payload:
            return payload["value"]
        if "text" in payload:
            return payload["text"]
    return payload


def _usage_before(ctx: Any) -> tuple[Usage, int] | None:
    usage = getattr(ctx, "usage", None)
    if not isinstance(usage, Usage):
        return None
    return _USAGE.validate_python(_USAGE.dump_python(usage)), len(usage.request_usage_entries)


def _usage_added(ctx: Any, before: tuple[Usage, int] | None) -> dict[str, Any] | None:
    """What the call added to the run's ``Usage``, as JSON, or ``None`` when nothing."""
    usage = getattr(ctx, "usage", None)
    if before is None or not isinstance(usage, Usage):
        return None
    old, entries = before
    added = {k: getattr(usage, k) - getattr(old, k) for k in _COUNTERS}
    if not any(added.values()):
        return None
    new_entries = usage.request_usage_entries[entries:]
    delta = Usage(**added, request_usage_entries=list(new_entries))
    data: dict[str, Any] = _USAGE.dump_python(delta, mode="json")
    return data


def _arguments(args_json: str) -> Any:
    try:
        return json.loads(args_json or "{}")
    except ValueError:
        return args_json


def wrap_tool(tool: FunctionTool) -> FunctionTool:
    """Make ``tool``'s calls durable tool calls inside a run (in place, once); return it."""
    original = tool.on_invoke_tool
    if getattr(original, WRAPPED, False):
        return tool
    binding = getattr(tool, "_mcp_tool_binding", None)
    name = tool_call(tool.name) if binding is None else mcp_call(binding[0], binding[1])

    async def invoke(ctx: Any, args_json: str) -> Any:
        if not in_run():
            return await original(ctx, args_json)
        options = options_of(tool)
        live: list[Any] = []
        before = _usage_before(ctx)

        async def body() -> Any:
            value = await original(ctx, args_json)
            live.append(value)
            payload = encode_output(value)
            added = _usage_added(ctx, before)
            if added is not None:
                payload[USAGE_ADDED] = added
            return payload

        run = CURRENT_RUN.get()
        call_id = getattr(ctx, "tool_call_id", None) or ""
        place = None if run is None else run.position(call_id)
        key, branch = (str(place[1]), f"turn-{place[0]}") if place is not None else (call_id, "call")
        try:
            async with durable.branch(key, name=branch):
                payload = await run_effect(
                    "tool",
                    name,
                    body,
                    idempotent=options.idempotent or bool(getattr(tool, "_is_agent_tool", False)),
                    reconcile=options.reconcile,
                    retry=options.retry,
                    compensate=options.compensate,
                    tool=tool.name,
                    args=_arguments(args_json),
                )
        except durable.DurableError as exc:
            raise carried(exc) from exc
        if live:
            if run is not None:
                run.live = True
            return live[-1]
        replayed_call()
        added = payload.get(USAGE_ADDED) if isinstance(payload, dict) else None
        usage = getattr(ctx, "usage", None)
        if added is not None and isinstance(usage, Usage):  # replayed: what it added once, again
            usage.add(_USAGE.validate_python(added))
        return decode_output(payload)

    functools.update_wrapper(invoke, original)
    invoke.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(invoke, WRAPPED, True)
    bind = getattr(original, "__agents_bind_function_tool__", None)
    if callable(bind):  # a copy of the tool gets an invoker bound to the copy, wrapped in turn

        def bind_copy(copy: FunctionTool) -> Any:
            copy.on_invoke_tool = bind(copy)
            return wrap_tool(copy).on_invoke_tool

        setattr(invoke, "__agents_bind_function_tool__", bind_copy)  # noqa: B010 - a dunder the SDK looks up
    tool.on_invoke_tool = invoke
    return tool
