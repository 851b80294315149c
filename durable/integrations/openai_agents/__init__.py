"""Make the OpenAI Agents SDK durable: ``install()``, or ``DurableRunner.run`` instead of ``Runner.run``.

Inside a ``@durable.workflow`` every model response of every agent (handoff
targets, agents used as tools, guardrail agents, whatever model or provider
they use) is a recorded model call, and every function tool call a recorded
tool call keyed by its place in its response; handoffs, guardrails and the
final output replay without calling anything. A killed run resumed with the
same ``run_id`` runs again only the call that was cut. Outside a run nothing
changes: ``DurableRunner`` is ``agents.Runner``.

- ``install()``: ``agents.Runner.run`` / ``run_streamed`` / ``run_sync``
  themselves become durable inside runs (the SDK's default agent runner).
- ``DurableRunner.run`` / ``run_streamed`` / ``run_sync``: the same, per call.
- ``tool_options(tool, idempotent=..., reconcile=..., compensate=..., retry=...)``:
  a function tool is a plain tool unless told (a call cut by a crash blocks
  the run with ``unknown_commit``).
- ``DurableSession(session_id)``: an SDK ``Session`` kept in the world's store,
  so a conversation survives a crash and a move to another worker.

Tools that need approval suspend the run through ``durable.interrupt``;
``handle.answer(True)``, ``little answer`` or the inspector approve or reject
them from any process.
"""

from __future__ import annotations

from ._options import ToolOptions, tool_options
from ._runner import DurableAgentRunner, DurableRunner, install
from ._session import DurableSession

__all__ = ["DurableAgentRunner", "DurableRunner", "DurableSession", "ToolOptions", "install", "tool_options"]

for _public in (DurableAgentRunner, DurableRunner, DurableSession, ToolOptions, install, tool_options):
    _public.__module__ = __name__  # reprs, docs and doctest name the public module
del _public
