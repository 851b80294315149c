"""The session manifest of an agent: its toolset ids, tool names, schemas and durable options."""

from __future__ import annotations

from typing import Any

from pydantic_ai import FunctionToolset
from pydantic_ai.toolsets import AbstractToolset

from .._manifest import described_tool


def manifest_tools(toolsets: list[AbstractToolset[Any]]) -> list[Any]:
    """The described tools of an agent's toolsets: each function tool with its options, each toolset's id."""
    described: dict[str, Any] = {}

    def visit(ts: AbstractToolset[Any]) -> None:
        ts_id = ts.id or "<unnamed>"
        if isinstance(ts, FunctionToolset):
            for tool_name, tool in ts.tools.items():
                where = f"function_toolset {ts_id}"
                options = (tool.metadata or {}).get("durable")
                described[tool_name] = described_tool(
                    tool_name, tool.tool_def.parameters_json_schema, where, options
                )
        else:
            kind = type(ts).__name__
            described[f"{kind}__{ts_id}"] = described_tool(f"{kind}__{ts_id}", None, f"toolset {ts_id}")

    for toolset in toolsets:
        toolset.apply(visit)
    return [described[k] for k in sorted(described)]
