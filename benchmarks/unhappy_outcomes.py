"""For each way a run goes wrong: the status it ends in, and how many drives that took.

Real worker processes serve the queue of ``tests.helpers.procs.unhappy_app``
on SQLite (a data directory) and on Postgres (``DURABLE_TEST_PG_DSN``). For
each error class the script provokes the error (a plain tool cut by SIGKILL,
code that changes under a waiting run, a drift, a run that kills its worker
every time), waits for the run's outcome, and counts its drives from the
workers' log (every ``… drives run RUN_ID`` line is one drive). It then
lets the workers run two more runs (several recovery passes) and counts
again: a run that is driven in a loop shows up as more drives after its
outcome.

Run it from the repository root:

    DURABLE_TEST_PG_DSN=postgresql://... python -m benchmarks.unhappy_outcomes
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import durable
from tests.runtime.unhappy import Procs, wait_for

CASES = [
    "plain_error",
    "non_retryable",
    "max_visits",
    "serialization",
    "configuration",
    "drift",
    "unknown_commit",
    "nondeterminism",
    "poison",
]


def drives(procs: Procs, run_id: str) -> int:
    """Drives of ``run_id`` the workers logged (``… drives run RUN_ID``, one line per drive)."""
    pattern = re.compile(rf"drives run {re.escape(run_id)} ")
    return len(pattern.findall(procs.err_text()))


def provoke(procs: Procs, case: str) -> str:
    """Start a run that goes wrong as ``case`` says; return its id once it has an outcome."""
    app, world, q = procs.app, procs.world, procs.app.unhappy
    info = {"DURABLE_TEST_INFO": "1"}
    if case == "unknown_commit":
        w = procs.worker(**info)
        h = durable.start_workflow(app.unknown_commit, 1, world=world, queue=q)
        wait_for(lambda: procs.bodies(tool="charge"), 30, "the tool to start")
        procs.kill(w)
        procs.worker(**info)
    elif case == "nondeterminism":
        procs.worker(**info)
        h = durable.start_workflow(app.nondeterminism, 1, world=world, queue=q)
        procs.ends(h.run_id)
        (procs.tmp / "shifted").touch()
        asyncio.run(durable.handle(h.run_id, world=world).answer(1))
    elif case == "drift":
        old = procs.worker(**info)
        h = durable.start_workflow(app.drift, 1, world=world, queue=q)
        procs.ends(h.run_id)
        procs.stop(old)
        procs.worker(DURABLE_TEST_VERSION="2", **info)
        asyncio.run(durable.handle(h.run_id, world=world).answer(1))
    elif case == "poison":
        h = durable.start_workflow(app.poison, 0, world=world, queue=q)

        def revive() -> bool:
            if all(p.poll() is not None for p in procs.procs):
                procs.worker(**info)
            return procs.status(h.run_id).status == "blocked"

        wait_for(revive, 90, "the poison run to be blocked")
    else:
        procs.worker(**info)
        h = durable.start_workflow(getattr(app, case), 1, world=world, queue=q)
    return h.run_id


def measure(kind: str, case: str) -> tuple[str, int, int, float]:
    """(status with reason, drives to the outcome, drives after it, seconds to the outcome)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"unhappy-{kind}-{case}-"))
    procs = Procs(kind, tmp)
    try:
        t0 = time.monotonic()
        rid = provoke(procs, case)
        st = procs.ends(rid, 90)
        took = time.monotonic() - t0
        before = drives(procs, rid)
        procs.settle()
        after = drives(procs, rid) - before
        status = st.status + (f" ({st.reason})" if st.reason else "")
        return status, before, after, took
    finally:
        procs.close()


def main(argv: list[str]) -> int:
    kinds = ["sqlite"] + (["postgres"] if os.environ.get("DURABLE_TEST_PG_DSN") else [])
    rows: list[tuple[str, ...]] = []
    for case in argv or CASES:
        row = [case]
        for kind in kinds:
            status, n, again, took = measure(kind, case)
            row += [status, str(n), str(again), f"{took:.1f}"]
        rows.append(tuple(row))
        print(" | ".join(row), file=sys.stderr, flush=True)
    head = ["error class"]
    for kind in kinds:
        head += [f"{kind}: status", "drives", "drives after", "s to outcome"]
    table: Callable[[list[str] | tuple[str, ...]], str] = lambda r: "| " + " | ".join(r) + " |"  # noqa: E731
    print(table(head))
    print(table(["---"] * len(head)))
    for r in rows:
        print(table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
