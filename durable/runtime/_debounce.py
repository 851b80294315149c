"""``start_workflow(..., debounce_key=, debounce=, debounce_max=)``: a burst of starts becomes one run.

While a run of the queue with the same debounce key is enqueued and not
started, a new start replaces that run's input and moves its start to
``debounce`` seconds from now, never past ``debounce_max`` seconds from the
first start of the burst, and returns the same handle. The control store
does it in the submit's own transaction (SQLite's write lock, a PostgreSQL
advisory lock on the queue), so starts from several processes agree.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigurationError


def _seconds(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"{name}= takes a number of seconds > 0, not {value!r}. Nothing was written."
        )
    return float(value)


def debounce_window(
    queue: str | None, key: Any, debounce: Any, debounce_max: Any, now: float
) -> tuple[str | None, float | None, float | None]:
    """``(debounce_key, start_at, debounce_until)`` of a new start, checked; all ``None`` without a key.

    Raises:
        ConfigurationError: A debounce without a queue or a key, or a bad number of seconds.
    """
    if key is None:
        if debounce is not None or debounce_max is not None:
            raise ConfigurationError(
                "debounce= and debounce_max= need debounce_key= (the key that groups a burst of "
                "starts). Nothing was written."
            )
        return None, None, None
    if not isinstance(key, str) or not key:
        raise ConfigurationError(
            f"debounce_key must be a non-empty string, not {key!r}. Nothing was written."
        )
    if queue is None:
        raise ConfigurationError(
            "debounce_key= applies to queued runs (the run waits on its queue until its start); "
            "pass queue=Queue(...) as well. Nothing was written."
        )
    if debounce is None:
        raise ConfigurationError(
            "debounce_key= needs debounce= (seconds to wait for the next start of the burst). "
            "Nothing was written."
        )
    wait = _seconds("debounce", debounce)
    if debounce_max is None:
        return key, now + wait, None
    most = _seconds("debounce_max", debounce_max)
    if most < wait:
        raise ConfigurationError(
            f"debounce_max={debounce_max!r} is shorter than debounce={debounce!r}; it bounds how far "
            "a burst can move the start, so it is at least debounce. Nothing was written."
        )
    return key, now + wait, now + most
