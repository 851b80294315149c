"""Session manifest entries for what a framework describes in data: tools by JSON schema, settings by value.

``durable.session(role, tools=...)`` records the signature and options of
each ``@durable.tool`` it is given, and a resume whose code offers other ones
fails closed with a drift report (``availableTools[i].signature``). A
framework's tools are not ``@durable.tool`` functions: they are a name and a
JSON schema (pydantic-ai's ``ToolDefinition``, the Agents SDK's
``FunctionTool``, LangChain's ``BaseTool``). ``described_tool`` makes a
stand-in whose signature reads as that schema, and ``described_value`` one
whose signature shows any other value a run depends on (an agent's
instructions hash, its handoffs, its model settings), so a change of either
shows in the drift report under its own name.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

import durable

_BAD = str.maketrans({c: "_" for c in ".[]#:/\\ <>"})


def name_part(name: str) -> str:
    """``name`` made usable inside a durable call name (no ``. [ ] # : /``)."""
    return name.strip("<>").translate(_BAD) or "_"


class _Shown:
    """An annotation that shows as the given text in a signature."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def described_tool(
    name: str, schema: Mapping[str, Any] | None, where: str, options: Mapping[str, Any] | None = None
) -> Any:
    """A ``@durable.tool`` that only describes a framework's tool for the session manifest.

    Its signature reads as the tool's JSON schema, one keyword per property, so a
    changed schema shows in the drift report as ``availableTools[i].signature``;
    its ``idempotent``, ``reconcile``, ``retry`` and ``compensate`` options are
    the tool's durable options, so a changed option shows as
    ``availableTools[i].options.idempotent``.

    Args:
        name: The tool's name (made usable in a path).
        schema: Its parameters' JSON schema (``properties``, ``required``).
        where: What offers it, shown as the signature's return (``function_toolset orders``).
        options: Its durable options (``idempotent``, ``reconcile``, ``retry``, ``compensate``).
    """
    props = dict((schema or {}).get("properties") or {})
    required = set((schema or {}).get("required") or ())
    params = [
        inspect.Parameter(
            p if p.isidentifier() else "_" + "".join(c if c.isalnum() else "_" for c in p),
            inspect.Parameter.KEYWORD_ONLY,
            annotation=_Shown(_text(sub)),
            default=inspect.Parameter.empty if p in required else _Shown("optional"),
        )
        for p, sub in sorted(props.items())
    ]
    return _stand_in(name, inspect.Signature(params, return_annotation=_Shown(where)), options or {})


def described_value(name: str, value: Any) -> Any:
    """A ``@durable.tool`` that only shows ``value`` for the session manifest: ``() -> <value>``.

    A changed value shows in the drift report as that entry's signature, named
    after the entry (``agent__triage__instructions tool signature changed``).
    """
    return _stand_in(name, inspect.Signature([], return_annotation=_Shown(_text(value))), {})


_STAND_INS: dict[tuple[Any, ...], Any] = {}
_MOST_STAND_INS = 4096
"""Descriptions kept made at most: past that the memo starts again (a process whose agents change forever)."""


def _stand_in(name: str, signature: inspect.Signature, options: Mapping[str, Any]) -> Any:
    """The stand-in of one description: made once, so its manifest entry is computed once."""
    opts = tuple(options.get(k) for k in ("idempotent", "reconcile", "retry", "compensate"))
    key = (name_part(name), str(signature), *opts)
    made = _STAND_INS.get(key)
    if made is not None:
        return made
    if len(_STAND_INS) >= _MOST_STAND_INS:
        _STAND_INS.clear()

    async def described(**kwargs: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - a description, never called

    described.__signature__ = signature  # type: ignore[attr-defined]
    made = _STAND_INS[key] = durable.tool(
        name=name_part(name),
        idempotent=bool(options.get("idempotent", False)),
        reconcile=options.get("reconcile"),
        retry=options.get("retry"),
        compensate=options.get("compensate"),
    )(described)
    return made
