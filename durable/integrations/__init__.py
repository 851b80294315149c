"""One-line integrations with agent frameworks and model clients.

- ``durable.integrations.pydantic_ai.Durability``: a pydantic-ai capability,
  ``Agent(model, name="support", capabilities=[Durability()])``.
- ``durable.integrations.openai.wrap(client)``: an ``openai`` client whose
  requests are ``@model_call`` calls inside a run.
- ``durable.integrations.anthropic.wrap(client)``: the same for ``anthropic``.
- ``durable.integrations.openai_agents.install()``: the OpenAI Agents SDK's
  ``Runner.run`` durable inside runs (or ``DurableRunner.run`` per call).

Each module needs its package (extras ``pydantic-ai``, ``openai``,
``anthropic``, ``openai-agents``, or ``agents`` for all); this package imports
none of them.
"""
