"""Make LangChain chat models, tools and agents durable: ``wrap``, ``wrap_tool``, ``DurableMiddleware``.

- ``wrap(model)``: a chat model whose ``invoke``, ``ainvoke``, ``stream``,
  ``astream``, ``batch`` and ``abatch`` (after ``bind_tools(...)`` and
  ``with_structured_output(...)`` too) are recorded model calls inside a
  run; a resume replays the recorded ``AIMessage`` or chunks.
- ``wrap_tool(tool, *, idempotent=False, reconcile=None, compensate=None)``:
  a tool whose calls are recorded tool calls keyed by their ``tool_call_id``;
  a plain tool cut by a crash fails closed (``UnknownCommitError``).
- ``DurableMiddleware()``: ``create_agent(model, tools,
  middleware=[DurableMiddleware()])`` makes every model and tool call of the
  agent durable in one line.

Inside a LangGraph graph every call is keyed by the task that makes it, so
the tasks of one step (parallel nodes, ``Send`` fan-out, gathered
``@task``s) may call at once and replay; keep a graph's threads in a
``durable.integrations.langgraph.DurableSaver``. Durable errors raised inside
a node or a tool node (an unknown commit, a replay off the log's path, a
spent budget) reach ``run_workflow`` unchanged, never as an error
``ToolMessage``. Outside a durable run nothing changes.

Needs the ``langchain`` extra (``pip install "little-workflow[langchain]"``).
"""

from __future__ import annotations

from ._middleware import DurableMiddleware
from ._model import wrap
from ._tool import wrap_tool

__all__ = ["DurableMiddleware", "wrap", "wrap_tool"]

DurableMiddleware.__module__ = __name__  # reprs, docs and doctest name the public module
