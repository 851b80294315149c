"""The persisted names of an agent's operations: compatibility data, pinned by a test."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic_ai.durable_exec import (
    CapabilityOperationId,
    DurableOperationId,
    EventStreamHandlerId,
    JournalOperationNamer,
    ModelCancelSuspendedResponseId,
    ModelCompactMessagesId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)

from .._manifest import name_part as _part


class DurabilityNamer(JournalOperationNamer):
    """The persisted durable call names of an agent's operations.

    The names are compatibility data: a run records them, and a resume must
    produce the same ones. They never change between releases (a test pins them).
    ``support__model_request``, ``support__function_toolset__orders__call_tool``,
    ``support__mcp_server__files__get_tools`` and so on.
    """

    def __init__(self, agent_name: str, *, default_model_id: str = "default") -> None:
        super().__init__(agent_name, default_model_id=default_model_id)
        self._agent = _part(agent_name)

    def _model(self, model_id: str | None) -> str:
        return "" if model_id is None or model_id == self._default_model_id else f"__{_part(model_id)}"

    def operation_name(self, operation_id: DurableOperationId) -> str:
        """The persisted name of one operation."""
        a = self._agent
        match operation_id:
            case ModelRequestId(model_id=model_id, streaming=streaming):
                op = "model_request_stream" if streaming else "model_request"
                return f"{a}__{op}{self._model(model_id)}"
            case ModelCompactMessagesId(model_id=model_id):
                return f"{a}__model_compact_messages{self._model(model_id)}"
            case ModelCancelSuspendedResponseId(model_id=model_id):
                return f"{a}__model_cancel_suspended_response{self._model(model_id)}"
            case CapabilityOperationId(capability_id=capability_id, operation=operation):
                return f"{a}__capability__{_part(capability_id)}__{_part(operation)}"
            case EventStreamHandlerId():
                return f"{a}__event_stream_handler"
            case ToolsetGetToolsId(toolset_kind=kind, toolset_id=toolset_id):
                return f"{a}__{_toolset(kind)}__{_part(toolset_id)}__get_tools"
            case ToolsetGetInstructionsId(toolset_id=toolset_id):
                return f"{a}__mcp_server__{_part(toolset_id)}__get_instructions"
            case ToolsetValidateToolArgumentsId(toolset_kind=kind, toolset_id=toolset_id):
                return f"{a}__{_toolset(kind)}__{_part(toolset_id)}__validate_args"
            case ToolsetCallToolId(toolset_kind=kind, toolset_id=toolset_id):
                return f"{a}__{_toolset(kind)}__{_part(toolset_id)}__call_tool"
            case _:  # the union grows in minor releases; a new operation keeps a stable name
                return f"{a}__{_part(type(operation_id).__name__)}"

    def live_stream_name(self, model_id: str | None) -> str:
        """The name of a streamed model request recorded event by event: ``support__model_stream``."""
        return f"{self._agent}__model_stream{self._model(model_id)}"

    def invocation_name(self, operation_id: DurableOperationId, *, label: str | None) -> Any:
        """The name of one call: a tool call adds the tool's name."""
        name = self.operation_name(operation_id)
        if isinstance(operation_id, ToolsetCallToolId) and label is not None:
            name = f"{name}__{_part(label)}"
        return replace(super().invocation_name(operation_id, label=label), operation_name=name)


def _toolset(kind: str) -> str:
    return "mcp_server" if kind == "mcp" else f"{kind}_toolset"
