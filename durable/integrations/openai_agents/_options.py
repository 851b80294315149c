"""A function tool's durable options: ``tool_options(tool, idempotent=True)``.

A function tool is a plain tool unless told: a call cut by a crash between
its intent and its receipt may or may not have happened, so the run is
blocked with ``unknown_commit`` rather than calling it again. The options
live on the ``FunctionTool`` object itself (copies of it keep them).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from agents.tool import FunctionTool
from pydantic_core import to_jsonable_python

import durable

from ...engine import spec_of
from .._effects import undo_tool
from ._names import tool_undo

T = TypeVar("T", bound=FunctionTool)

OPTIONS = "_durable_options"
"""The attribute of a ``FunctionTool`` that holds its ``ToolOptions``."""


@dataclass(frozen=True)
class ToolOptions:
    """A function tool's durable options (see ``tool_options``)."""

    idempotent: bool = False
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None
    compensate: Any = None
    retry: Any = None

    def manifest(self) -> dict[str, Any]:
        """The options as the session manifest's stand-in for the tool takes them."""
        return {
            "idempotent": self.idempotent,
            "reconcile": self.reconcile,
            "retry": self.retry,
            "compensate": self.compensate,
        }


PLAIN = ToolOptions()


def options_of(tool: Any) -> ToolOptions:
    """The durable options set on ``tool``, or a plain tool's."""
    found = getattr(tool, OPTIONS, None)
    return found if isinstance(found, ToolOptions) else PLAIN


def _recorded_output(outcome: Any) -> Any:
    """What ``reconcile`` says happened, as a tool call's record holds it."""
    if outcome is durable.NEVER_HAPPENED:
        return outcome
    return {"value": to_jsonable_python(outcome, fallback=lambda v: str(v))}


def _reconciler(fn: Callable[[str, dict[str, Any]], Any]) -> Callable[[str, dict[str, Any]], Any]:
    async def reconcile(key: str, identity: dict[str, Any]) -> Any:
        outcome = fn(key, identity)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return _recorded_output(outcome)

    reconcile.__qualname__ = getattr(fn, "__qualname__", "reconcile")
    return reconcile


def _undo(name: str, fn: Callable[..., Awaitable[Any]]) -> Any:
    """The compensation tool of ``fn``: called with the tool's arguments and ``result=`` its output."""
    spec = spec_of(fn)
    body = spec.fn if spec is not None else fn

    async def undo(identity: dict[str, Any], result: Any) -> Any:
        args = identity.get("args")
        value = result.get("value", result.get("text")) if isinstance(result, dict) else result
        if isinstance(args, dict):
            return await body(**args, result=value)
        return await body(args, result=value)

    if spec is None:
        return undo_tool(name, undo)
    return undo_tool(name, undo, idempotent=spec.idempotent, reconcile=spec.reconcile, retry=spec.retry)


def tool_options(
    tool: T,
    *,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None,
    compensate: Callable[..., Awaitable[Any]] | None = None,
    retry: Any = None,
) -> T:
    """Set a function tool's durable options; returns the same tool.

    Args:
        tool: A ``FunctionTool`` (what ``@function_tool`` makes).
        idempotent: Safe to call again with the same ``durable.idempotency_key()`` after a
            crash cut a call: the call is made again instead of blocking the run.
        reconcile: Asked ``reconcile(key, {"tool": name, "args": {...}})`` after such a crash:
            return the tool's output if the call happened, or ``durable.NEVER_HAPPENED``.
        compensate: An async function (or ``@durable.tool``) that undoes a confirmed call when
            the run fails for good or is cancelled: called with the call's arguments as
            keywords and ``result=`` its output, newest call first.
        retry: A ``durable.RetryPolicy`` (or tenacity objects) for errors that leave the
            tool: one made with ``failure_error_function=None`` raises instead of telling the
            model, and is called again under the policy.

    Raises:
        ConfigurationError: ``tool`` is no ``FunctionTool``, or an option has the wrong type.

    Example:
        >>> from agents import function_tool
        >>> from durable.integrations.openai_agents import tool_options
        >>> @function_tool
        ... def refund(order_id: str) -> str:
        ...     return f"refunded {order_id}"
        >>> tool_options(refund, idempotent=True) is refund
        True
    """
    if not isinstance(tool, FunctionTool):
        raise durable.ConfigurationError(
            f"tool_options() takes a FunctionTool (made by @function_tool or agent.as_tool), not {tool!r}."
        )
    if not isinstance(idempotent, bool):
        raise durable.ConfigurationError(
            f"tool_options(idempotent=...) takes True or False, not {idempotent!r}."
        )
    if reconcile is not None and not callable(reconcile):
        raise durable.ConfigurationError(
            f"tool_options(reconcile=...) takes a function (key, input), not {reconcile!r}."
        )
    if compensate is not None and not (
        inspect.iscoroutinefunction(compensate) or getattr(spec_of(compensate), "is_async", False)
    ):
        raise durable.ConfigurationError(
            f"tool_options(compensate=...) takes an async function called with the tool's arguments "
            f"and result=, not {compensate!r}."
        )
    undo = None if compensate is None else _undo(tool_undo(tool.name), compensate)
    setattr(
        tool,
        OPTIONS,
        ToolOptions(
            idempotent=idempotent,
            reconcile=None if reconcile is None else _reconciler(reconcile),
            compensate=undo,
            retry=retry,
        ),
    )
    return tool
