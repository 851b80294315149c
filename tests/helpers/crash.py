"""Crash points for in-process crash tests, on top of ``durable.testing.CrashingLog``.

Buffered events that never reached the log are lost exactly as in a killed
process; the test then opens a new world over the same storage and resumes.
Real SIGKILL tests live in ``test_sigkill.py`` and the other ``*_sigkill`` suites.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable.engine._values import dumps
from durable.testing import SimulatedCrash

__all__ = ["SimulatedCrash", "on"]


def on(type_: str, containing: str = "") -> Callable[[str, dict[str, Any]], bool]:
    """Crash before the first event of ``type_`` whose stored JSON contains ``containing``."""
    return lambda t, d: t == type_ and containing in dumps(d)
