"""The session manifest of an agent run: its agents, their instructions, tools, handoffs and settings.

A resume whose code offers another agent graph fails closed before anything
runs, with a drift report that names what changed: for each agent reachable
from the starting one, ``agent__<name>__instructions`` (a hash of a string,
the qualified name of a function), ``__model``, ``__settings``,
``__handoffs`` and ``__output``; for each function tool, its JSON schema,
whether it needs approval and its durable options; for each MCP server, its
name (its tool list is recorded per run, not pinned by the code).
"""

from __future__ import annotations

import hashlib
from typing import Any

from agents.handoffs import Handoff
from agents.tool import FunctionTool

from .._manifest import described_tool, described_value
from ._instrument import reachable
from ._model import jsonable, model_label
from ._options import options_of


def _instructions(instructions: Any) -> Any:
    if instructions is None:
        return None
    if isinstance(instructions, str):
        return "sha256:" + hashlib.sha256(instructions.encode()).hexdigest()[:16]
    return f"{getattr(instructions, '__module__', '?')}.{getattr(instructions, '__qualname__', '?')}"


def _model(model: Any) -> Any:
    return model if isinstance(model, str) or model is None else model_label(model)


def _handoffs(agent: Any) -> list[str]:
    names = []
    for h in agent.handoffs:
        names.append(h.agent_name if isinstance(h, Handoff) else getattr(h, "name", "?"))
    return names


def _output(agent: Any) -> Any:
    output = agent.output_type
    if output is None or output is str:
        return None
    return getattr(output, "__qualname__", None) or repr(output)


def _approval(tool: FunctionTool) -> str:
    needs = tool.needs_approval
    return "callable" if callable(needs) else str(bool(needs)).lower()


def manifest(agent: Any) -> list[Any]:
    """The described tools of the run's session manifest, sorted by name."""
    described: dict[str, Any] = {}
    for a in reachable(agent):
        prefix = f"agent__{a.name}"
        entries = {
            "instructions": _instructions(a.instructions),
            "model": _model(a.model),
            "settings": jsonable(a.model_settings.to_json_dict()),
            "handoffs": _handoffs(a),
            "output": _output(a),
        }
        for field, value in entries.items():
            described[f"{prefix}__{field}"] = (described_value, f"{prefix}__{field}", value)
        for tool in a.tools:
            if isinstance(tool, FunctionTool):
                where = f"function_tool approval={_approval(tool)}"
                schema = tool.params_json_schema
                opts = options_of(tool).manifest()
                described[tool.name] = (described_tool, tool.name, schema, where, opts)
        for server in getattr(a, "mcp_servers", None) or ():
            name = f"mcp__{server.name}"
            described[name] = (described_value, name, type(server).__qualname__)
    return [make(*args) for make, *args in (described[k] for k in sorted(described))]
