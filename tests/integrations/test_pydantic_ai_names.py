"""The persisted durable call names of the pydantic-ai capability never change.

These names are compatibility data: a run in flight recorded them, and the
resumed code must produce the same ones. Change a pin only together with a
reviewed migration of recorded runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
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
from pydantic_ai.models.function import FunctionModel

import durable
from durable.integrations.pydantic_ai import Durability, DurabilityNamer
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


def test_a_live_stream_name_is_pinned() -> None:
    """A streamed request recorded event by event is named support__model_stream (plus a model id)."""
    namer = DurabilityNamer("support")
    assert namer.live_stream_name(None) == "support__model_stream"
    assert namer.live_stream_name("fast") == "support__model_stream__fast"


def _streamed_names(world: durable.World, **options: Any) -> set[str]:
    async def words(messages: Any, info: Any) -> Any:
        yield "a "
        yield "b"

    agent = Agent(FunctionModel(stream_function=words), name="s", capabilities=[Durability(**options)])

    @durable.workflow
    async def streamed(q: str) -> str:
        async with agent.run_stream(q) as run:
            return await run.get_output()

    assert asyncio.run(durable.run_workflow(streamed, "q", world=world, run_id="r")) == "a b"
    return {e.name for e in world.events("r") if e.type == "effect.intent"}  # type: ignore[union-attr]


def test_a_streamed_request_is_a_live_stream_by_default(world: durable.World) -> None:
    """run_stream inside a run records the request as the live stream s__model_stream."""
    assert _streamed_names(world) == {"s__model_stream"}


def test_live_streams_off_records_the_request_as_earlier_releases_did(world: durable.World) -> None:
    """Durability(live_streams=False) records s__model_request_stream, as runs of earlier releases hold."""
    assert _streamed_names(world, live_streams=False) == {"s__model_request_stream"}
