"""A three-cycle outer loop whose steps and supervise calls are counted, for the outer-loop tests.

The workflow revises a draft in two steps (``write`` then ``polish``); the
supervisor continues with the polished draft until cycle 3, which it accepts.
Counts go to ``runs`` (in-process tests) and, when ``count_file`` is set, to
an append-only file fsynced after each line (tests that kill processes).
Below it are the helpers the in-process outer-loop tests share: reading and
replacing a manifest, and making a first "process" die at a commit point.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import durable
from durable.outer._manifest import ManifestStore, OuterLoopManifest
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash

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


# -- helpers of the in-process tests ------------------------------------------------


def run(coro: Any) -> Any:
    """Run a coroutine to its end on a fresh event loop."""
    return asyncio.run(coro)


def manifest_json(world: durable.World, outer_loop_id: str = "ol_test") -> dict[str, Any]:
    """The stored manifest as JSON data, read the way a person would read the file."""
    store = ManifestStore(world, outer_loop_id)
    text = (
        store.path.read_text()
        if store.path is not None
        else (world.outer_loop_manifests or {})[outer_loop_id]
    )
    data: dict[str, Any] = json.loads(text)
    return data


def write_manifest_text(world: durable.World, text: str, outer_loop_id: str = "ol_test") -> None:
    """Replace the stored manifest with ``text`` (damaged or legacy content)."""
    store = ManifestStore(world, outer_loop_id)
    if store.path is not None:
        store.path.parent.mkdir(parents=True, exist_ok=True)
        store.path.write_text(text)
    else:
        if world.outer_loop_manifests is None:
            world.outer_loop_manifests = {}
        world.outer_loop_manifests[outer_loop_id] = text


FINAL = Draft(text="d***", round=3)


def arm_crash(monkeypatch: pytest.MonkeyPatch, h: Harness, point: str, cycle: int) -> None:
    """Make the first process 'die' at ``point`` of cycle ``cycle``."""
    if point == "mid_cycle":
        h.crash_in_polish, h.crash = cycle, SimulatedCrash
        return
    original = ManifestStore.save
    armed = [True]

    def save(self: ManifestStore, m: OuterLoopManifest) -> None:
        pending_write = m.pendingCycleRunId is not None and len(m.cycles) == cycle - 1
        cycle_write = m.pendingCycleRunId is None and len(m.cycles) == cycle
        if armed[0] and point == "before_pending" and pending_write:
            armed[0] = False
            raise SimulatedCrash
        if armed[0] and point == "after_commit" and cycle_write:
            armed[0] = False
            raise SimulatedCrash
        original(self, m)
        if armed[0] and point == "after_manifest" and cycle_write:
            armed[0] = False
            raise SimulatedCrash

    monkeypatch.setattr(ManifestStore, "save", save)


def crash_after_cycle_1(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """A loop whose first process died right after cycle 1's manifest update."""
    h = Harness()
    with monkeypatch.context() as m:
        arm_crash(m, h, "after_manifest", 1)
        with pytest.raises(SimulatedCrash):
            run(h.run(worlds.open()))
    return h
