"""One call on a run's timeline, as the inspector's model reads it and its tree nests it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Item:
    """One call on a run's timeline: a step, an effect, a timer, an interrupt or a recorded value."""

    kind: str
    key: str
    name: str
    first_seq: int
    last_seq: int
    state: str = "pending"
    attempts: int = 1
    errors: list[str] = field(default_factory=list)
    child_run_id: str | None = None
    detail: str = ""
    replayed: bool = False
    ms: float | None = None
    """The time its attempts took, in milliseconds (``None`` when the log does not say)."""
    at: float | None = None
    """When its latest event was committed (Unix seconds; ``None`` when the log does not say)."""

    def took(self, e: dict[str, Any]) -> None:
        """Add the ``ms`` of an outcome event to the call's time."""
        ms = e.get("ms")
        if isinstance(ms, int | float):
            self.ms = (self.ms or 0.0) + float(ms)
