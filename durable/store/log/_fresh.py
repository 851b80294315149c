"""Runs whose fence saw no event: the read that follows the fence is answered without a query.

A driver fences a run, then reads its log. When the fence already learnt
that the run has no event (a queued run never started), that read would
only say so again. The mark is used once, and only within ``EMPTY_FOR``
seconds of the fence; an append of the run drops it. Answering the read
as empty is safe even when another writer started the run in between:
the fence's token then no longer holds, and the driver's first append is
refused as stale, so nothing is written on top of a log it did not read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

EMPTY_FOR = 1.0
"""Seconds after a fence during which the run's next read may be answered as empty."""
_PRUNE_AT = 4096
"""Marks held before the expired ones are dropped."""


class FreshRuns:
    """The marks of one log's fenced, never-started runs (``run_id`` -> monotonic time of the fence)."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}

    def mark(self, run_id: str) -> None:
        """The fence of ``run_id`` saw no event."""
        now = time.monotonic()
        if len(self._at) >= _PRUNE_AT:  # fences no read followed: their marks are of no use now
            self._at = {r: at for r, at in self._at.items() if now - at < EMPTY_FOR}
        self._at[run_id] = now

    def drop(self, run_id: str) -> None:
        """Forget the mark of ``run_id`` (a new fence, a read that asked the database)."""
        self._at.pop(run_id, None)

    def written(self, run_ids: Iterable[str]) -> None:
        """Appends of these runs are on their way: their next reads must ask the database."""
        if self._at:
            for run_id in run_ids:
                self._at.pop(run_id, None)

    def read_as_empty(self, run_id: str) -> bool:
        """Whether this read of ``run_id`` is the first right after a fence that saw no event."""
        if not self._at:
            return False
        at = self._at.pop(run_id, None)
        return at is not None and time.monotonic() - at < EMPTY_FOR
