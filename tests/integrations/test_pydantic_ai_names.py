"""The persisted durable call names of the pydantic-ai capability never change.

These names are compatibility data: a run in flight recorded them, and the
resumed code must produce the same ones. Change a pin only together with a
reviewed migration of recorded runs.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai.durable_exec import (
    CapabilityOperationId,
    EventStreamHandlerId,
    ModelCancelSuspendedResponseId,
    ModelCompactMessagesId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)

import durable
from durable.integrations.pydantic_ai import DurabilityNamer
from tests.integrations.test_pydantic_ai import Support

PINNED = {
    ModelRequestId(None, model_name="m"): "support__model_request",
    ModelRequestId("default", model_name="m"): "support__model_request",
    ModelRequestId(None, streaming=True, model_name="m"): "support__model_request_stream",
    ModelRequestId("openai:gpt-5", model_name="gpt-5"): "support__model_request__openai_gpt-5",
    ModelCompactMessagesId(None, model_name="m"): "support__model_compact_messages",
    ModelCancelSuspendedResponseId(None, model_name="m"): "support__model_cancel_suspended_response",
    CapabilityOperationId("memo", operation="lookup"): "support__capability__memo__lookup",
    EventStreamHandlerId(): "support__event_stream_handler",
    ToolsetGetToolsId("mcp", toolset_id="notes"): "support__mcp_server__notes__get_tools",
    ToolsetGetToolsId("dynamic", toolset_id="dyn"): "support__dynamic_toolset__dyn__get_tools",
    ToolsetGetInstructionsId("notes"): "support__mcp_server__notes__get_instructions",
    ToolsetValidateToolArgumentsId(
        "function", toolset_id="orders"
    ): "support__function_toolset__orders__validate_args",
    ToolsetCallToolId("function", toolset_id="orders"): "support__function_toolset__orders__call_tool",
    ToolsetCallToolId("mcp", toolset_id="notes"): "support__mcp_server__notes__call_tool",
    ToolsetCallToolId("function", toolset_id="<agent>"): "support__function_toolset__agent__call_tool",
}


@pytest.mark.parametrize(("operation", "name"), list(PINNED.items()), ids=list(PINNED.values()))
def test_operation_names_are_pinned(operation: object, name: str) -> None:
    """Each operation's persisted name is exactly the pinned one."""
    assert DurabilityNamer("support").operation_name(operation) == name  # type: ignore[arg-type]


def test_a_tool_call_name_adds_the_tool_name() -> None:
    """A tool call is named by its toolset and its tool."""
    call = DurabilityNamer("support").invocation_name(
        ToolsetCallToolId("function", toolset_id="orders"), label="x"
    )
    assert call.operation_name == "support__function_toolset__orders__call_tool__x"


def test_a_run_records_exactly_the_pinned_names(world: durable.World) -> None:
    """The effect names a real run writes are the pinned ones."""
    asyncio.run(durable.run_workflow(Support().workflow(), "q", world=world, run_id="r"))
    names = sorted({e.name for e in world.events("r") if e.type == "effect.intent"})  # type: ignore[union-attr]
    tool = "support__function_toolset__orders__call_tool"
    assert names == [
        f"{tool}__carrier_eta",
        f"{tool}__find_order",
        f"{tool}__track_parcel",
        "support__model_request",
    ]
