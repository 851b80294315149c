"""A three-cycle outer loop whose steps and supervise calls are counted, for the outer-loop tests.

The workflow revises a draft in two steps (``write`` then ``polish``); the
supervisor continues with the polished draft until cycle 3, which it accepts.
Counts go to ``runs`` (in-process tests) and, when ``count_file`` is set, to
an append-only file fsynced after each line (tests that kill processes).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import durable

ACCEPT_AT = 3
MAX_CYCLES = 5


class Draft(BaseModel):
    text: str
    round: int = 0


class Harness:
    """The loop's workflow and supervisor, with counters and a crash hook in ``polish``."""

    def __init__(self, count_file: Path | None = None, accept_at: int = ACCEPT_AT):
        self.runs: Counter[str] = Counter()
        self.count_file = count_file
        self.accept_at = accept_at
        self.crash_in_polish: int | None = None
        self.crash: BaseException | type[BaseException] | None = None
        self.on_polish: Any = None

        @durable.step
        async def write(d: Draft) -> Draft:
            self.count(f"write:{d.round + 1}")
            return Draft(text=d.text + "+", round=d.round + 1)

        @durable.step
        async def polish(d: Draft) -> Draft:
            if self.on_polish is not None:
                self.on_polish(d.round)
            if self.crash_in_polish == d.round and self.crash is not None:
                self.crash_in_polish = None
                raise self.crash
            self.count(f"polish:{d.round}")
            return Draft(text=d.text.replace("+", "*"), round=d.round)

        @durable.workflow
        async def revise(d: Draft) -> Draft:
            return await polish(await write(d))

        self.workflow = revise

    def count(self, what: str) -> None:
        """Count one finished piece of work."""
        self.runs[what] += 1
        if self.count_file is not None:
            fd = os.open(self.count_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (what + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def supervise(self, cycle: durable.Cycle) -> durable.Done[Draft] | durable.Continue[Draft]:
        """Continue with the polished draft until cycle ``accept_at``, then accept it."""
        self.count(f"supervise:{cycle.number}")
        if cycle.number >= self.accept_at:
            return durable.Done(cycle.output)
        return durable.Continue(cycle.output, summary=f"round {cycle.number} polished")

    async def run(
        self, world: durable.World, outer_loop_id: str = "ol_test", **kwargs: Any
    ) -> durable.OuterLoopResult:
        """Run (or resume) the loop on ``Draft(text="d")``."""
        options: dict[str, Any] = {"max_cycles": MAX_CYCLES, "supervise": self.supervise}
        options.update(kwargs)
        return await durable.run_outer_loop(
            self.workflow, Draft(text="d"), outer_loop_id=outer_loop_id, world=world, **options
        )


def expected_counts(cycles: int = ACCEPT_AT) -> Counter[str]:
    """Every step of every cycle and every supervise call, once."""
    found: Counter[str] = Counter()
    for n in range(1, cycles + 1):
        found.update([f"write:{n}", f"polish:{n}", f"supervise:{n}"])
    return found


def read_counts(count_file: Path) -> Counter[str]:
    """The counts an fsynced count file holds."""
    if not count_file.exists():
        return Counter()
    return Counter(count_file.read_text().split())
