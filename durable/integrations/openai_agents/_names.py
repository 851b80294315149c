"""The persisted names of the Agents SDK's durable calls: compatibility data, pinned by a test.

A run records these names in its log, and a resume must produce the same
ones, so they never change between releases. Model calls carry the agent and
model in their identity, not in their name: the runner resolves a model
without telling the model which agent it serves.
"""

from __future__ import annotations

from .._manifest import name_part

MODEL = "openai_agents__model"
"""A model response (``Model.get_response``)."""

MODEL_STREAM = "openai_agents__model_stream"
"""A streamed model response (``Model.stream_response``), recorded event by event."""


def tool_call(tool: str) -> str:
    """A function tool's call: ``openai_agents__tool__lookup_order``."""
    return f"openai_agents__tool__{name_part(tool)}"


def mcp_call(server: str, tool: str) -> str:
    """An MCP server's tool call: ``openai_agents__mcp__notes__search``."""
    return f"openai_agents__mcp__{name_part(server)}__{name_part(tool)}"


def mcp_listing(server: str) -> str:
    """An MCP server's tool list: ``openai_agents__mcp__notes__list_tools``."""
    return f"openai_agents__mcp__{name_part(server)}__list_tools"


def session_op(op: str) -> str:
    """A conversation session's read or write: ``openai_agents__session__add_items``."""
    return f"openai_agents__session__{op}"


def tool_undo(tool: str) -> str:
    """The compensation of a function tool's call: ``openai_agents__undo__refund``."""
    return f"openai_agents__undo__{name_part(tool)}"
