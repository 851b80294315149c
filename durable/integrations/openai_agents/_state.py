"""What one durable agent run keeps while it goes: its model turns, their tool calls, its listings.

``DurableRunner.run`` (or ``Runner.run`` after ``install()``) makes one
``AgentRun`` for each agent run inside a workflow and puts it in a context
variable, so the model, tool and MCP wrappers, which the SDK calls without
saying which run they serve, find it: the SDK's tool tasks are created from
the run's own context and see the same object.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any


class AgentRun:
    """The state of one durable agent run.

    Attributes:
        turn: The number of model calls made so far (the current turn is ``turn - 1``).
        positions: Each function call id of the latest responses: its turn and its place
            among the response's function calls.
        listings: MCP servers' tool lists, recorded once per run, by server name.
        resumed: The run's session was in the log when it opened (a resume replays it).
        live: A model or tool call of this run executed in this drive (not replayed).
        agent: The name of the agent whose turn it is.
        replayed: Trace spans that covered a replayed tool call (``_tracing``).
        quiet: Trace spans whose start was not told, being replayed work (``_tracing``).
    """

    __slots__ = ("agent", "listings", "live", "positions", "quiet", "replayed", "resumed", "turn")

    def __init__(self, agent: str, *, resumed: bool) -> None:
        self.turn = 0
        self.positions: dict[str, tuple[int, int]] = {}
        self.listings: dict[str, list[Any]] = {}
        self.resumed = resumed
        self.live = False
        self.agent = agent
        self.replayed: set[str] = set()
        self.quiet: set[str] = set()

    def responded(self, output: Iterable[Any]) -> None:
        """Note a model response: its function calls get the turn it was and their order in it."""
        turn = self.turn
        self.turn += 1
        calls = [item for item in output if _field(item, "type") == "function_call"]
        for i, item in enumerate(calls):
            call_id = _field(item, "call_id")
            if isinstance(call_id, str):
                self.positions[call_id] = (turn, i)

    def position(self, call_id: str) -> tuple[int, int] | None:
        """The turn and order of a function call this run's model asked for, or ``None``."""
        return self.positions.get(call_id)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


CURRENT_RUN: ContextVar[AgentRun | None] = ContextVar("durable_openai_agents_run", default=None)
"""The durable agent run the running code belongs to, or ``None``."""
