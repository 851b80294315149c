"""The examples in the integrations' docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("durable.integrations.pydantic_ai", "pydantic_ai"),
        ("durable.integrations.openai", "openai"),
        ("durable.integrations.anthropic", "anthropic"),
        ("durable.integrations.openai_agents", "agents"),
        ("durable.integrations.langchain", "langchain"),
        ("durable.integrations.langchain._model", "langchain"),
        ("durable.integrations.langchain._tool", "langchain"),
        ("durable.integrations.langgraph", "langgraph"),
    ],
)
def test_docstring_examples_run(module: str, package: str) -> None:
    """Every ``>>>`` example of the module gives the output it shows."""
    pytest.importorskip(package)
    try:
        result = doctest.testmod(importlib.import_module(module), raise_on_error=False)
    finally:
        if package == "agents":  # install()'s example sets the SDK's default runner: put it back
            from agents.run import set_default_agent_runner

            set_default_agent_runner(None)
    assert result.attempted > 0
    assert result.failed == 0
