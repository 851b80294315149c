"""The fields every event of a run's log has: its run, its position and when it was committed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class EventBase(BaseModel):
    """The fields every event has; a model adds its ``type`` and its payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = ""
    """The run this event belongs to."""
    seq: int = 0
    """Position in the run's log: 1, 2, 3, … without gaps."""
    at: float | None = None
    """When the log committed the event, in Unix seconds (the store's clock; ``None`` for
    rows written before the store kept times, or by a store that keeps none)."""
