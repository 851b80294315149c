"""A child process for the SIGKILL loop tests: runs a loop, and can stop at a chosen point.

Run from the repository root::

    python -m tests.helpers.loop_child outer DATA_DIR COUNT_FILE [--pause POINT --cycle N] [--report-wait]
    python -m tests.helpers.loop_child decision DATA_DIR COUNT_FILE [--pause visit --cycle K]

At the pause point the child prints ``AT <point> <n>`` and blocks reading a
line from stdin: the test either kills it there with SIGKILL or writes a line
to let it go on. With ``--report-wait`` it prints ``WAITING`` the first time
it finds the outer loop's lock held by another process. At the end it prints
``RESULT <json>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import durable
from durable.outer import _loop as _outer
from durable.outer._manifest import ManifestStore, OuterLoopManifest
from durable.store import FileLocks
from tests.helpers.outer_loop_harness import Draft, Harness


def pause(point: str, n: int) -> None:
    """Tell the test where we are, then wait for it to kill us or let us go on."""
    print(f"AT {point} {n}", flush=True)
    sys.stdin.readline()


def install_pause(h: Harness, point: str, cycle: int) -> None:
    """Stop the loop at ``point`` of cycle ``cycle``."""
    if point == "mid_cycle":
        h.on_polish = lambda round_: pause(point, cycle) if round_ == cycle else None
    elif point == "in_supervise":
        inner = h.supervise

        def supervise(c: durable.Cycle) -> Any:
            if c.number == cycle:
                pause(point, cycle)
            return inner(c)

        h.supervise = supervise  # type: ignore[method-assign]
    elif point == "after_commit":
        append = _outer._append_commit

        async def append_then_pause(world: durable.World, run_id: str, data: dict[str, Any]) -> Any:
            got = await append(world, run_id, data)
            if data["cycle"] == cycle:
                pause(point, cycle)
            return got

        _outer._append_commit = append_then_pause  # type: ignore[assignment]
    else:
        save = ManifestStore.save

        def save_with_pause(self: ManifestStore, m: OuterLoopManifest) -> None:
            pending_write = m.pendingCycleRunId is not None and len(m.cycles) == cycle - 1
            cycle_write = m.pendingCycleRunId is None and len(m.cycles) == cycle
            if point == "before_pending" and pending_write:
                pause(point, cycle)
            save(self, m)
            if point == "after_manifest" and cycle_write:
                pause(point, cycle)

        ManifestStore.save = save_with_pause  # type: ignore[method-assign]


def report_wait() -> None:
    """Print WAITING once, the first time a lock is found held by someone else."""
    try_acquire = FileLocks.try_acquire
    told = [False]

    def watched(self: FileLocks, name: str) -> object | None:
        handle = try_acquire(self, name)
        if handle is None and not told[0] and name.startswith("outer-loop:"):
            told[0] = True
            print("WAITING", flush=True)
        return handle

    FileLocks.try_acquire = watched  # type: ignore[method-assign]


def outer(args: argparse.Namespace) -> dict[str, Any]:
    h = Harness(count_file=Path(args.count_file))
    if args.pause:
        install_pause(h, args.pause, args.cycle)
    if args.report_wait:
        report_wait()
    with durable.local_world(args.data_dir) as world:
        result = asyncio.run(h.run(world))
    return {
        "final_output": result.final_output.model_dump(),
        "ended": result.ended,
        "cycles": [[c.number, c.run_id, c.decision] for c in result.cycles],
    }


def decision(args: argparse.Namespace) -> dict[str, Any]:
    h = Harness(count_file=Path(args.count_file))

    @durable.step(max_visits=4)
    async def revise(d: Draft) -> Draft:
        if args.pause == "visit" and d.round == args.cycle:
            pause("visit", d.round)
        h.count(f"revise:{d.round}")
        return Draft(text=d.text + "+", round=d.round + 1)

    @durable.step(max_visits=4)
    async def critique(d: Draft) -> bool:
        h.count(f"critique:{d.round - 1}")
        return d.round >= 3

    @durable.workflow
    async def draft_loop(d: Draft) -> Draft:
        while True:
            d = await revise(d)
            if await critique(d):
                return d

    with durable.local_world(args.data_dir) as world:
        out = asyncio.run(durable.run_workflow(draft_loop, Draft(text="d"), world=world, run_id="loop"))
        paths = [e.path for e in world.events("loop") if e.type == "step.completed"]  # type: ignore[union-attr]
    return {"final_output": out.model_dump(), "paths": paths}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["outer", "decision"])
    parser.add_argument("data_dir")
    parser.add_argument("count_file")
    parser.add_argument("--pause", default="")
    parser.add_argument("--cycle", type=int, default=0)
    parser.add_argument("--report-wait", action="store_true")
    args = parser.parse_args()
    found = outer(args) if args.mode == "outer" else decision(args)
    print("RESULT " + json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
