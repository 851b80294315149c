"""Waiting on a condition with a bound, instead of sleeping a fixed time and hoping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(cond: Callable[[], object], timeout: float = 60.0, what: str = "the condition") -> None:
    """Poll ``cond()`` every 5 ms until it is true; ``AssertionError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not become true within {timeout:g} s")
        await asyncio.sleep(0.005)
