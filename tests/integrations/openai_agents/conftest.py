"""The OpenAI Agents SDK tests: each leaves the SDK's globals as it found them.

Each test file skips itself where the SDK is missing (a core-only install).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _sdk_globals() -> Iterator[None]:
    """No trace exporter (nothing leaves the machine); the SDK's own default runner afterwards."""
    if importlib.util.find_spec("agents") is None:
        yield
        return
    from agents import set_trace_processors
    from agents.run import set_default_agent_runner

    set_trace_processors([])
    yield
    set_default_agent_runner(None)
