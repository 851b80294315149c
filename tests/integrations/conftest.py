"""Fixtures for the integration tests: the scripted model API of the cookbook, on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"
if str(COOKBOOK) not in sys.path:
    sys.path.insert(0, str(COOKBOOK))

from _scripted_api import Reply, Request, ScriptedAPI, ToolCall  # noqa: E402


def script(request: Request) -> Reply:
    """Turn 0 asks for two tools at once; later turns answer in words."""
    if request.turn == 0 and request.route != "responses":
        return Reply(
            tool_calls=[ToolCall("call_a", "look", {"q": "a"}), ToolCall("call_b", "look", {"q": "b"})]
        )
    return Reply(text=f"answer after {request.turn} turns")


@pytest.fixture
def api() -> Iterator[ScriptedAPI]:
    """The scripted openai / anthropic API, answering from ``script``."""
    with ScriptedAPI(script) as server:
        yield server
