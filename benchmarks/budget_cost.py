"""What a budget costs per model call: a budgeted run against an unbudgeted one, in one process.

Run from the repository root::

    PYTHONHASHSEED=0 python -m benchmarks.budget_cost [--calls 400] [--repeats 7]

Both runs make the same model calls (a ``@durable.model_call`` that returns a
usage, as the integrations record a response) on one SQLite data directory;
they take turns, repeat after repeat, and each figure is the median. It
prints the wall and CPU time per call of each, their difference, and the
exact Python opcodes per call of each (``sys.settrace`` with
``f_trace_opcodes``, a run of 50 calls subtracted from one of 150, as
``benchmarks/opcodes.py`` counts a step): the check before each call and the
count after it show up there without timing noise.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import durable


@durable.model_call
async def ask(i: int) -> dict[str, Any]:
    return {"model": "small", "usage": {"input_tokens": 100, "output_tokens": 10}, "i": i}


@durable.workflow
async def agent(n: int) -> int:
    for i in range(n):
        await ask(i)
    return n


BUDGET = durable.Budget(
    max_model_calls=10**9, max_tokens=10**12, max_cost=10**9, prices={"small": (1.0, 4.0)}
)

COUNT = 0


def _tracer(frame: Any, event: str, arg: Any) -> Any:
    global COUNT
    frame.f_trace_opcodes = True
    if event == "opcode":
        COUNT += 1
    return _tracer


async def _one(world: durable.World, run_id: str, n: int, budgeted: bool) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await durable.run_workflow(agent, n, world=world, run_id=run_id, budget=BUDGET if budgeted else None)
    return time.perf_counter() - wall, time.process_time() - cpu


async def _opcodes(world: durable.World, budgeted: bool) -> float:
    global COUNT
    counts = []
    for n in (50, 150):
        COUNT = 0
        sys.settrace(_tracer)
        try:
            await durable.run_workflow(
                agent, n, world=world, run_id=f"op-{budgeted}-{n}", budget=BUDGET if budgeted else None
            )
        finally:
            sys.settrace(None)
        counts.append(COUNT)
    return (counts[1] - counts[0]) / 100


async def main(calls: int, repeats: int) -> None:
    tmp = tempfile.mkdtemp()
    try:
        with durable.local_world(tmp) as world:
            await _one(world, "warm-plain", 5, False)  # first-call costs out of the way
            await _one(world, "warm-budget", 5, True)
            got: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for r in range(repeats):
                for budgeted in (False, True) if r % 2 == 0 else (True, False):
                    got[budgeted].append(await _one(world, f"r{r}-{budgeted}", calls, budgeted))
            ops = {b: await _opcodes(world, b) for b in (False, True)}
        per = {
            b: (
                statistics.median(w for w, _ in got[b]) / calls * 1e6,
                statistics.median(c for _, c in got[b]) / calls * 1e6,
            )
            for b in (False, True)
        }
        for b, label in ((False, "unbudgeted"), (True, "budgeted")):
            wall, cpu = per[b]
            print(
                f"{label}: wall_us_per_call={wall:.1f} cpu_us_per_call={cpu:.1f} "
                f"opcodes_per_call={ops[b]:.1f}"
            )
        print(
            f"difference: wall_us_per_call={per[True][0] - per[False][0]:+.1f} "
            f"cpu_us_per_call={per[True][1] - per[False][1]:+.1f} "
            f"opcodes_per_call={ops[True] - ops[False]:+.1f} (calls={calls}, repeats={repeats})"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="model calls per run (default 400)")
    parser.add_argument("--repeats", type=int, default=7, help="runs of each kind (default 7)")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.repeats))
