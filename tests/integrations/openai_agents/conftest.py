"""The OpenAI Agents SDK tests: skipped without the SDK; each leaves the SDK's globals as it found them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("agents")

from agents import set_trace_processors
from agents.run import set_default_agent_runner


@pytest.fixture(autouse=True)
def _sdk_globals() -> Iterator[None]:
    """No trace exporter (nothing leaves the machine); the SDK's own default runner afterwards."""
    set_trace_processors([])
    yield
    set_default_agent_runner(None)
