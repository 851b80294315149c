"""An agent's MCP servers inside a run: their tool lists recorded once per run, their calls recorded.

The runner lists every MCP server's tools at each turn and builds new
function tools from the lists. Inside a run, the first listing of a server is
a recorded call (an idempotent ``@durable.tool``, keyed ``mcp[<server>]``) and
later turns of the same run get the same list: a resume sees the tools the
first execution saw, whatever the server offers by then. A tool the model
calls is recorded as a function tool call (``_tools``); ``call_tool`` made
by the workflow's own code is recorded on its own.
"""

from __future__ import annotations

import functools
from typing import Any

from mcp.types import CallToolResult
from mcp.types import Tool as MCPTool

import durable

from ...engine import carried, keyed
from .._effects import in_run, run_effect
from .._manifest import name_part
from ._names import mcp_call, mcp_listing
from ._state import CURRENT_RUN

WRAPPED = "__durable_wrapped__"


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_unset=True)


def wrap_server(server: Any) -> None:
    """Make ``server``'s listings and calls durable inside a run (in place, once)."""
    list_tools = server.list_tools
    if getattr(list_tools, WRAPPED, False):
        return
    call_tool = server.call_tool

    async def listed(*args: Any, **kwargs: Any) -> Any:
        if not in_run():
            return await list_tools(*args, **kwargs)
        run = CURRENT_RUN.get()
        if run is not None and server.name in run.listings:
            return list(run.listings[server.name])
        live: list[Any] = []

        async def body() -> Any:
            tools = await list_tools(*args, **kwargs)
            live.append(tools)
            return {"tools": [_dump(t) for t in tools]}

        try:
            with keyed("mcp", name_part(server.name)):
                payload = await run_effect(
                    "tool", mcp_listing(server.name), body, idempotent=True, server=server.name
                )
        except durable.DurableError as exc:
            raise carried(exc) from exc
        tools = live[-1] if live else [MCPTool.model_validate(t) for t in payload["tools"]]
        if run is not None:
            run.listings[server.name] = list(tools)
        return tools

    async def called(tool_name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not in_run():
            return await call_tool(tool_name, arguments, *args, **kwargs)
        live: list[Any] = []

        async def body() -> Any:
            result = await call_tool(tool_name, arguments, *args, **kwargs)
            live.append(result)
            return _dump(result)

        try:
            with keyed("mcp", name_part(server.name)):
                payload = await run_effect(
                    "tool", mcp_call(server.name, tool_name), body, tool=tool_name, args=arguments
                )
        except durable.DurableError as exc:
            raise carried(exc) from exc
        return live[-1] if live else CallToolResult.model_validate(payload)

    for fn, orig in ((listed, list_tools), (called, call_tool)):
        functools.update_wrapper(fn, orig)
        setattr(fn, WRAPPED, True)
    server.list_tools = listed
    server.call_tool = called
