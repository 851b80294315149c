"""What one Postgres announcement costs the process that hears it, with many results awaited at once.

Run from the repository root::

    python -m benchmarks.notify_fanout [ANNOUNCEMENTS] [--repeats N]

A process on a Postgres world has one listening thread; every
``RunHandle.result()`` waiting in it subscribes to its own run's
announcements (``run:<id>``, ``cancel:<id>``), a worker to ``queue:``, a
driver to ``cancel:``. For W waiting results (1, 100, 1,000 and 10,000),
each about a run of its own, this times the listening thread's dispatch of
announcements about other runs (what every other run's end costs the
process), in two ways taking turns:

- ``keyed``: the listener's ``Announcements``, which keeps its subscribers
  by the payload or prefix they name, so an announcement looks up its own;
- ``filter each``: a list of subscribers each testing every payload
  against its own topics (the listener's design before).

It prints the CPU time per announcement, the median over the repeats,
and the ratio of the largest W to one waiter for each way. No server is
needed: the thread's wire (psycopg's ``notifies()``) costs the same either way.

A second table times remembering a new payload once ``RECENT`` distinct
ones are held (``heard_lately``; every run id is new, so this is every
announcement of a busy world): the listener's whole announcement, whose
ordered dict forgets its oldest payload at once, against the plain dict's
memory alone that it replaced, whose first key is found by a scan past every
key deleted since its last resize.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Collection

from durable.store.postgres._notify import RECENT, Announcements

WAITERS = (1, 100, 1_000, 10_000)
WAYS = ("keyed", "filter each")
MEMORY = ("keyed", "plain dict")
MEMORY_LABELS = (
    "the listener's whole announcement (an ordered dict remembers)",
    "a plain dict's memory alone (before)",
)


class FilterEach(Announcements):
    """Subscribers in a list, each testing every payload (the design ``Announcements`` replaced).

    The count, the memory of recent payloads and the lock are the
    listener's own; only who is woken, and how, is the old way.
    """

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[Callable[[str | None], None]] = []

    def subscribe(self, on_change: Callable[[], None], about: Collection[str] = ()) -> Callable[[], None]:
        exact = frozenset(a for a in about if not a.endswith(":"))
        prefixes = tuple(a for a in about if a.endswith(":"))

        def heard(payload: str | None) -> None:
            if not about or payload is None or payload in exact or payload.startswith(prefixes):
                on_change()

        self.listeners.append(heard)
        return lambda: self.listeners.remove(heard)

    def _woken_by(self, payload: str) -> list[Callable[[], None]]:
        listeners = list(self.listeners)  # copied under the lock; each tests the payload outside it

        def each() -> None:
            for heard in listeners:
                heard(payload)

        return [each]


def one(way: str, waiters: int, announcements: int) -> float:
    """CPU µs per announcement about runs nobody here waits for, with ``waiters`` results awaited."""
    heard = Announcements() if way == "keyed" else FilterEach()
    woken = [0]

    def wake() -> None:
        woken[0] += 1

    for i in range(waiters):
        heard.subscribe(wake, (f"run:w{i}", f"cancel:w{i}"))
    heard.subscribe(wake, ("cancel:",))  # the process's driver
    payloads = [f"run:other{i}" for i in range(announcements)]
    bump = heard._bump
    t0 = time.process_time()
    for p in payloads:
        bump(p)
    spent = time.process_time() - t0
    assert woken[0] == 0  # nobody here waits for these runs
    return spent / announcements * 1e6


def remember(way: str, announcements: int) -> float:
    """CPU µs to remember one new payload, ``RECENT`` distinct ones already held (the oldest goes)."""
    if way == "keyed":
        heard = Announcements()
        for i in range(RECENT):
            heard._bump(f"run:held{i}")
        payloads = [f"run:new{i}" for i in range(announcements)]
        t0 = time.process_time()
        for p in payloads:
            heard._bump(p)
        return (time.process_time() - t0) / announcements * 1e6
    recent: dict[str, None] = {f"run:held{i}": None for i in range(RECENT)}  # the memory before
    payloads = [f"run:new{i}" for i in range(announcements)]
    t0 = time.process_time()
    for p in payloads:
        recent.pop(p, None)
        recent[p] = None
        if len(recent) > RECENT:
            del recent[next(iter(recent))]  # a scan past every key deleted since the last resize
    return (time.process_time() - t0) / announcements * 1e6


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.notify_fanout")
    parser.add_argument("announcements", nargs="?", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args(argv)
    announcements: int = opts.announcements
    repeats: int = opts.repeats
    figures: dict[tuple[str, int], list[float]] = {}
    for r in range(repeats):
        for waiters in WAITERS:
            # Fewer announcements where each costs more, so a repeat stays within a second or two.
            n = max(min(announcements, announcements * 100 // waiters), 200)
            for way in WAYS if r % 2 == 0 else WAYS[::-1]:
                figures.setdefault((way, waiters), []).append(one(way, waiters, n))
    print(f"announcements per measurement: up to {announcements:,}, {repeats} repeat(s), medians")
    print()
    print("| results awaited | way | CPU µs / announcement | min–max |")
    print("|---:|---|---:|---|")
    med: dict[tuple[str, int], float] = {}
    for waiters in WAITERS:
        for way in WAYS:
            xs = figures[(way, waiters)]
            med[(way, waiters)] = m = statistics.median(xs)
            print(f"| {waiters:,} | {way} | {m:.2f} | {min(xs):.2f}–{max(xs):.2f} |")
    print()
    top = WAITERS[-1]
    for way in WAYS:
        print(f"{way}: {top:,} results awaited / 1 = {med[(way, top)] / med[(way, 1)]:.2f}×")
    ratio = med[("filter each", top)] / med[("keyed", top)]
    print(f"filter each / keyed at {top:,} results awaited = {ratio:.1f}×")

    kept: dict[str, list[float]] = {way: [] for way in MEMORY}
    for r in range(repeats):
        for way in MEMORY if r % 2 == 0 else MEMORY[::-1]:
            kept[way].append(remember(way, announcements))
    print()
    print(f"A new payload heard with {RECENT:,} distinct ones already remembered (the oldest is forgotten):")
    print()
    print("| way | CPU µs / announcement | min–max |")
    print("|---|---:|---|")
    for way, label in zip(MEMORY, MEMORY_LABELS, strict=True):
        xs = kept[way]
        print(f"| {label} | {statistics.median(xs):.2f} | {min(xs):.2f}–{max(xs):.2f} |")
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
