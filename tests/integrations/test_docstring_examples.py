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
    ],
)
def test_docstring_examples_run(module: str, package: str) -> None:
    """Every ``>>>`` example of the module gives the output it shows."""
    pytest.importorskip(package)
    result = doctest.testmod(importlib.import_module(module), raise_on_error=False)
    assert result.attempted > 0
    assert result.failed == 0
