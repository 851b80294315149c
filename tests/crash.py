"""An in-process crash double: a log that dies before writing a chosen batch.

Buffered events that never reached the log are lost exactly as in a killed
process; the test then opens a new world over the same storage and resumes.
Real SIGKILL tests live in ``test_sigkill.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from durable._log import Append, EventLog


class SimulatedCrash(BaseException):
    """The process 'died' here."""


class CrashingLog:
    """Wraps a log; the first append with a row matching ``when`` crashes, and so does every later one."""

    def __init__(self, inner: EventLog, when: Callable[[str, str], bool]):
        self._inner = inner
        self._when = when
        self.crashed = False

    def append(self, batch: Sequence[Append]) -> None:
        if self.crashed or any(self._when(t, d) for a in batch for _, t, d in a.rows):
            self.crashed = True
            raise SimulatedCrash("simulated crash before this append")
        self._inner.append(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def on(type_: str, containing: str = "") -> Callable[[str, str], bool]:
    """Crash before the first row of ``type_`` whose JSON contains ``containing``."""
    return lambda t, d: t == type_ and containing in d
