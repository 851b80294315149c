"""The session manifest of an agent: its toolset ids, tool names, schemas and durable options."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

from pydantic_ai import FunctionToolset
from pydantic_ai.toolsets import AbstractToolset

import durable

from ._names import _part


class _Shown:
    """An annotation that shows as the given text in a signature."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _described_tool(
    name: str, schema: Mapping[str, Any] | None, where: str, options: Mapping[str, Any] | None = None
) -> Any:
    """A ``@durable.tool`` that only describes a pydantic-ai tool for the session manifest.

    Its signature reads as the tool's JSON schema, one keyword per property, so a
    changed schema shows in the drift report as ``availableTools[i].signature``;
    its ``idempotent`` and ``reconcile`` options are the tool's ``tool_options``, so
    a changed option shows as ``availableTools[i].options.idempotent``.
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
    opts = options or {}
    return durable.tool(
        name=_part(name), idempotent=bool(opts.get("idempotent", False)), reconcile=opts.get("reconcile")
    )(described)


def manifest_tools(toolsets: list[AbstractToolset[Any]]) -> list[Any]:
    """The described tools of an agent's toolsets: each function tool with its options, each toolset's id."""
    described: dict[str, Any] = {}

    def visit(ts: AbstractToolset[Any]) -> None:
        ts_id = ts.id or "<unnamed>"
        if isinstance(ts, FunctionToolset):
            for tool_name, tool in ts.tools.items():
                where = f"function_toolset {ts_id}"
                options = (tool.metadata or {}).get("durable")
                described[tool_name] = _described_tool(
                    tool_name, tool.tool_def.parameters_json_schema, where, options
                )
        else:
            kind = type(ts).__name__
            described[f"{kind}__{ts_id}"] = _described_tool(f"{kind}__{ts_id}", None, f"toolset {ts_id}")

    for toolset in toolsets:
        toolset.apply(visit)
    return [described[k] for k in sorted(described)]
