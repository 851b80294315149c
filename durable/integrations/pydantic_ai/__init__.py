"""Make a pydantic-ai ``Agent`` durable with one capability: ``Durability()``.

``Agent(model, name="support", capabilities=[Durability()])``, then
``await agent.run(...)`` (or ``run_stream``, ``iter``) inside a
``@durable.workflow``. Built on pydantic-ai's public durable-execution
extension API (``pydantic_ai.durable_exec``): the base capability routes every
model request, tool call and MCP listing through an operation backend, and
this module's backend makes each of them a durable call:

- a model request is a ``@durable.model_call`` whose identity is the request
  without the fields that change on every run (timestamps, run and
  conversation ids); a streamed request is a streamed one whose events reach
  the run as they arrive and replay one by one (``_live_stream``);
- a tool call is a ``@durable.tool`` inside ``durable.branch(tool_call_id)``
  within its model turn, so the calls of one turn run in parallel and keep
  their keys; ``ModelRetry``, ``CallDeferred`` and approvals cross as values;
  the run gets the tool's own value, rebuilt from its return annotation on a
  replay, and the usage the call added is added again when it replays
  (``_tool_results``);
- an agent run inside a tool call (a delegate) records its own calls below
  that call, so a kill inside it runs again only the call it cut;
- an MCP server's ``get_tools`` / ``get_instructions`` and a dynamic toolset's
  listing are idempotent ``@durable.tool`` calls, so a replay sees the tools
  the first run saw;
- the run opens ``durable.session(<agent name>)`` whose manifest lists every
  function tool with its JSON schema and options and every toolset id, so a
  renamed tool, a changed schema or changed options fail the resume with
  ``CapabilityDriftError``.

Per-tool options come from tool metadata:
``metadata={"durable": {"idempotent": True, "reconcile": fn}}``. Outside a
durable run the capability is transparent.
"""

from __future__ import annotations

from ._backend import VOLATILE_FIELDS
from ._capability import Durability
from ._names import DurabilityNamer
from ._options import ToolOptions, tool_options

__all__ = ["VOLATILE_FIELDS", "Durability", "DurabilityNamer", "ToolOptions", "tool_options"]

for _public in (Durability, DurabilityNamer):
    _public.__module__ = __name__  # reprs, docs and doctest name the public module
del _public
