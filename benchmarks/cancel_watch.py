"""What a SQLite driver's watch for cancellations costs at each ring of the doorbell.

Run from the repository root::

    python -m benchmarks.cancel_watch [READS] [--repeats N]

SQLite's doorbell cannot say what changed, so a driver reads the pending
cancellations of the runs it drives at every ring: every enqueue and every
end in the data directory. For 1, 10, 100 and 1,000 runs claimed by the
driver (none of them with a request, the usual case), this times that read
in two ways, taking turns on one control store:

- ``partial index``: ``SqliteControl.cancel_requests``, which reads the
  store's pending cancellations through a partial index holding only the
  claimed runs with a request, then keeps those asked about;
- ``by run id``: the read it replaced, which named every run the driver
  holds (``run_id IN (...)``, 500 ids a query).

It prints the CPU time per read, the median over the repeats, and the
ratio of the two ways at each number of runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from durable.store import ControlRecord, QueueLimits
from durable.store.control._sqlite import SqliteControl

DRIVEN = (1, 10, 100, 1_000)
WAYS = ("partial index", "by run id")


def by_run_id(ctl: SqliteControl, run_ids: list[str]) -> dict[str, str]:
    """The read before the partial index: every run the driver holds, named in the query."""
    out: dict[str, str] = {}
    with ctl._lock:
        for i in range(0, len(run_ids), 500):
            chunk = run_ids[i : i + 500]
            marks = ",".join("?" for _ in chunk)
            for rid, reason in ctl._db.execute(
                f"SELECT run_id, cancel_reason FROM control WHERE run_id IN ({marks}) "
                "AND cancel_reason IS NOT NULL AND state = 'claimed'",
                chunk,
            ):
                out[rid] = reason
    return out


def one(ctl: SqliteControl, way: str, run_ids: list[str], reads: int) -> float:
    """CPU µs per read of the pending cancellations of ``run_ids``."""
    wanted = set(run_ids)  # the driver keeps its runs in a dict: a set of ids is what it passes
    t0 = time.process_time()
    if way == "partial index":
        for _ in range(reads):
            assert ctl.cancel_requests(wanted) == {}
    else:
        for _ in range(reads):
            assert by_run_id(ctl, run_ids) == {}
    return (time.process_time() - t0) / reads * 1e6


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cancel_watch")
    parser.add_argument("reads", nargs="?", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args(argv)
    reads: int = opts.reads
    repeats: int = opts.repeats
    figures: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for driven in DRIVEN:
            ctl = SqliteControl(Path(tmp) / f"control-{driven}.db")
            try:
                for i in range(driven):
                    ctl.submit(ControlRecord(f"run{i:05d}", "wf", queue="q", created_at=1.0))
                # Runs of other drivers beside them, one with a request: the index holds it alone.
                for i in range(driven):
                    ctl.submit(ControlRecord(f"other{i:05d}", "wf", created_at=1.0, state="claimed"))
                ctl.request_cancel("other00000", "stop", 2.0)
                got = ctl.claim(QueueLimits("q"), owner="w", pid=1, host="h", room=driven, now=2.0)
                run_ids = sorted(r.run_id for r in got)
                assert len(run_ids) == driven
                for r in range(repeats):
                    for way in WAYS if r % 2 == 0 else WAYS[::-1]:
                        figures.setdefault((way, driven), []).append(one(ctl, way, run_ids, reads))
            finally:
                ctl.close()
    print(f"{reads:,} reads per measurement, {repeats} repeat(s), medians")
    print()
    print("| runs driven | way | CPU µs / read | min–max |")
    print("|---:|---|---:|---|")
    med: dict[tuple[str, int], float] = {}
    for driven in DRIVEN:
        for way in WAYS:
            xs = figures[(way, driven)]
            med[(way, driven)] = m = statistics.median(xs)
            print(f"| {driven:,} | {way} | {m:.1f} | {min(xs):.1f}–{max(xs):.1f} |")
    print()
    for driven in DRIVEN:
        ratio = med[("by run id", driven)] / med[("partial index", driven)]
        runs = "1 run" if driven == 1 else f"{driven:,} runs"
        print(f"by run id / partial index with {runs} driven = {ratio:.1f}×")


if __name__ == "__main__":
    main(sys.argv[1:])
