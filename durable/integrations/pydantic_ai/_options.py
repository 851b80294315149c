"""A tool's durable options, from its metadata: ``metadata=tool_options(idempotent=True)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import to_jsonable_python

import durable

ToolOptions = dict[str, Any]
"""A tool's durable options: ``{"idempotent": bool, "reconcile": fn}`` (from tool metadata)."""


def _reconciler(fn: Callable[[str, dict[str, Any]], Any]) -> Callable[[str, dict[str, Any]], Any]:
    """Adapt a user's ``reconcile(key, input)`` to the recorded tool-call payload."""

    def reconcile(key: str, inp: dict[str, Any]) -> Any:
        outcome = fn(key, inp)
        if outcome is durable.NEVER_HAPPENED:
            return outcome
        # The recorded shape of a tool's return value (pydantic-ai's ``CallToolResult``, kind "tool_return").
        return {
            "kind": "tool_return",
            "result": to_jsonable_python(outcome, fallback=lambda v: type(v).__qualname__),
        }

    reconcile.__qualname__ = getattr(fn, "__qualname__", "reconcile")
    return reconcile


_RECONCILERS: dict[Any, Callable[[str, dict[str, Any]], Any]] = {}


def reconcile_option(config: ToolOptions) -> Callable[[str, dict[str, Any]], Any] | None:
    fn = config.get("reconcile")
    if fn is None:
        return None
    if fn not in _RECONCILERS:
        _RECONCILERS[fn] = _reconciler(fn)
    return _RECONCILERS[fn]


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
