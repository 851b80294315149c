"""The user's agents made durable where they stand: no copies, every wrapper a pass-through outside runs.

Temporal, DBOS and Restate copy the agent graph before a run, so a run's
``last_agent`` is a copy. Here each object the runner will call is wrapped in
place, once, when a durable run first reaches it: each agent's ``Model``
instance, function tools (agents used as tools included, and the agents
behind them), the agents it hands off to (a ``Handoff`` object's target is
wrapped when the handoff hands it over), its MCP servers and the function
tools made from their listings each turn, and its guardrail functions, which
run beside the first model call and so make their durable calls (a guardrail
agent's) in a scope of their own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from typing import Any

from agents import Agent
from agents.guardrail import InputGuardrail, OutputGuardrail
from agents.handoffs import Handoff
from agents.models.interface import Model
from agents.tool import FunctionTool

from ...engine import keyed
from .._effects import in_run
from .._manifest import name_part
from ._mcp import wrap_server
from ._model import wrap_model
from ._state import CURRENT_RUN
from ._tools import wrap_tool

WRAPPED = "__durable_wrapped__"


def reachable(agent: Any) -> Iterator[Any]:
    """Every agent reachable from ``agent``: itself, its handoff agents, the agents behind its agent tools."""
    seen: set[int] = set()
    todo = [agent]
    while todo:
        a = todo.pop()
        if id(a) in seen or not isinstance(a, Agent):
            continue
        seen.add(id(a))
        yield a
        for h in a.handoffs:
            if isinstance(h, Agent):
                todo.append(h)
        for t in a.tools:
            inner = getattr(t, "_agent_instance", None)
            if inner is not None:
                todo.append(inner)


def instrument(agent: Any, run_config: Any = None) -> None:
    """Wrap everything the runner may call for ``agent`` and the agents reachable from it (once)."""
    for a in reachable(agent):
        _agent(a)
    if run_config is not None:
        if isinstance(run_config.model, Model):
            wrap_model(run_config.model)
        for g in run_config.input_guardrails or ():
            wrap_guardrail(g, "input")
        for g in run_config.output_guardrails or ():
            wrap_guardrail(g, "output")


def _agent(agent: Any) -> None:
    if isinstance(agent.model, Model):
        wrap_model(agent.model)
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            wrap_tool(tool)
    for h in agent.handoffs:
        if isinstance(h, Handoff):
            wrap_handoff(h)
    for server in getattr(agent, "mcp_servers", None) or ():
        wrap_server(server)
    for g in agent.input_guardrails or ():
        wrap_guardrail(g, "input")
    for g in agent.output_guardrails or ():
        wrap_guardrail(g, "output")
    _track(agent)


def _track(agent: Any) -> None:
    """Note the agent whose turn it is (for model calls' identity), and wrap its MCP tools per turn."""
    prompt = agent.get_system_prompt
    if getattr(prompt, WRAPPED, False):
        return

    async def get_system_prompt(*args: Any, **kwargs: Any) -> Any:
        run = CURRENT_RUN.get()
        if run is not None:
            run.agent = agent.name
        return await prompt(*args, **kwargs)

    mcp_tools = agent.get_mcp_tools

    async def get_mcp_tools(*args: Any, **kwargs: Any) -> Any:
        tools = await mcp_tools(*args, **kwargs)
        if in_run():
            for tool in tools:
                if isinstance(tool, FunctionTool):
                    wrap_tool(tool)
        return tools

    for fn, orig in ((get_system_prompt, prompt), (get_mcp_tools, mcp_tools)):
        functools.update_wrapper(fn, orig)
        setattr(fn, WRAPPED, True)
    agent.get_system_prompt = get_system_prompt
    agent.get_mcp_tools = get_mcp_tools


def wrap_handoff(h: Handoff[Any, Any]) -> None:
    """Make the agent a handoff hands over durable before it takes its turn (once)."""
    original = h.on_invoke_handoff
    if getattr(original, WRAPPED, False):
        return

    async def on_invoke_handoff(*args: Any, **kwargs: Any) -> Any:
        agent = await original(*args, **kwargs)
        if in_run():
            instrument(agent)
        return agent

    functools.update_wrapper(on_invoke_handoff, original)
    setattr(on_invoke_handoff, WRAPPED, True)
    h.on_invoke_handoff = on_invoke_handoff


def wrap_guardrail(g: InputGuardrail[Any] | OutputGuardrail[Any], kind: str) -> None:
    """Run a guardrail function's durable calls in its own scope ``guardrail-<kind>[<name>]`` (once).

    Input guardrails run beside the run's first model call; a guardrail agent's
    model calls there would otherwise share the run's scope with it.
    """
    original = g.guardrail_function
    if getattr(original, WRAPPED, False):
        return
    key = name_part(g.get_name())

    def guardrail_function(*args: Any, **kwargs: Any) -> Any:
        if not in_run():
            return original(*args, **kwargs)

        async def guarded() -> Any:
            with keyed(f"guardrail-{kind}", key):
                out = original(*args, **kwargs)
                if inspect.isawaitable(out):
                    out = await out
                return out

        return guarded()

    functools.update_wrapper(guardrail_function, original)
    setattr(guardrail_function, WRAPPED, True)
    g.guardrail_function = guardrail_function
