"""What a tool call's record holds beyond pydantic-ai's own payload, and how a replay rebuilds it.

- The usage the call added to the run's shared ``RunUsage`` (a delegate agent
  run with ``usage=ctx.usage``), under ``"usage_added"``: a replayed call adds
  it again, so a resumed run counts the requests and tokens an uncut run does.
- The tool's return value rebuilt as the tool's return annotation (a pydantic
  model, a dataclass), so a replayed ``ToolReturnPart`` holds what the first run's
  did, not the JSON it was recorded as.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import FunctionToolset
from pydantic_ai.toolsets import AbstractToolset
from pydantic_core import to_json

USAGE_ADDED = "usage_added"
"""The key of a tool call's recorded payload that holds the usage the call added."""

_RECORDED_RETURN = "tool_return"  # pydantic-ai's recorded kind of a plain tool return value


def usage_counts(usage: Any) -> dict[str, Any]:
    """The counters of a ``RunUsage`` (tokens, requests, cost) and its ``details``, as plain data."""
    counts: dict[str, Any] = {
        k: v for k, v in vars(usage).items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    counts["details"] = dict(getattr(usage, "details", None) or {})
    return counts


def usage_added(before: dict[str, Any], usage: Any) -> dict[str, Any]:
    """What ``usage`` gained since ``before`` (from ``usage_counts``), without the unchanged counters."""
    after = usage_counts(usage)
    added: dict[str, Any] = {k: v - before.get(k, 0) for k, v in after.items() if k != "details"}
    added = {k: v for k, v in added.items() if v}
    details = {k: v - before["details"].get(k, 0) for k, v in after["details"].items()}
    details = {k: v for k, v in details.items() if v}
    if details:
        added["details"] = details
    return added


def add_usage(usage: Any, added: dict[str, Any]) -> None:
    """Add a recorded ``usage_added`` to the run's ``RunUsage`` in place."""
    for key, value in added.items():
        if key == "details":
            for name, n in value.items():
                usage.details[name] = usage.details.get(name, 0) + n
        elif hasattr(usage, key):
            setattr(usage, key, (getattr(usage, key) or 0) + value)


def return_types(toolsets: list[AbstractToolset[Any]]) -> dict[str, Any]:
    """The return annotation of each function tool of ``toolsets``, by tool name (where it has one)."""
    found: dict[str, Any] = {}

    def visit(ts: AbstractToolset[Any]) -> None:
        if isinstance(ts, FunctionToolset):
            for name, tool in ts.tools.items():
                try:
                    hint = typing.get_type_hints(tool.function).get("return")
                except Exception:  # an annotation that does not resolve: the value stays JSON
                    continue
                if hint is not None and hint is not Any:
                    found[name] = hint

    for toolset in toolsets:
        toolset.apply(visit)
    return found


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def rebuilt(payload: Any, returns: Any) -> Any:
    """A recorded tool-call payload whose plain return value is rebuilt as ``returns``.

    A value that does not validate as ``returns`` (a ``ToolReturn``, a control-flow
    signal), or would not dump back to the recorded JSON, is left as recorded.
    """
    if returns is None or not isinstance(payload, dict) or payload.get("kind") != _RECORDED_RETURN:
        return payload
    adapter = _ADAPTERS.get(returns)
    if adapter is None:
        try:
            adapter = _ADAPTERS[returns] = TypeAdapter(returns)
        except Exception:  # not a type pydantic can validate: the value stays JSON
            return payload
    recorded = payload["result"]
    try:
        value = adapter.validate_python(recorded)
        # Rebuilt only when it is the recorded value itself (an int under ``-> float`` is left
        # alone): the next model request's identity holds it, and must match the first run's.
        if adapter.dump_json(value) != to_json(recorded):
            return payload
    except (ValidationError, TypeError, ValueError):
        return payload
    return {**payload, "result": value}


ReturnTypes = Callable[[str], Any]
"""The return annotation of a tool by name, or ``None``."""
