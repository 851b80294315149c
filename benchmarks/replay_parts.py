"""Where a replayed step's time goes, part by part, and what a column layout of the log would leave.

Run from the repository root::

    python -m benchmarks.replay_parts [STEPS] [--rounds N]

A run of STEPS steps that waits on ``durable.interrupt`` at its end is
resumed, so every step replays (scenario (c) replay); one of no steps is
resumed too, and their difference per step is durable's replay cost, as the
harness counts it. In the same process, in turns, over N rounds (medians,
µs per step, wall and CPU time), the parts of that cost are timed alone on
the same file:

- **read**: the run's rows fetched in one query (``seq, type, data``);
- **parse**: their JSON payloads parsed, as the engine parses them (one
  call of the parser per chunk of rows);
- **index**: ``Recorded`` built from the parsed rows (its time above the parse);
- **calls**: what is left, the engine's work per replayed call: the claim of
  the scope's next position, the step's path, the input's JSON and hash, the
  recorded output looked up, compared and returned.

Then the same rows are copied to a table that keeps what replay compares in
columns of their own (path, input hash, the output's JSON) and the rest of
the payload in ``data``, and the read, parse and index of that layout are
timed: a log that replays without parsing its payloads. Its estimate is
those parts plus the same calls, above a plain ``await`` as target (c)
counts it. It says how far a change of the log's layout, which every store,
the verifier, the inspector and the ops commands would have to follow,
could move the replay target.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pydantic_core

from benchmarks.python_bound import durable_replay, plain, waiting_run
from durable.engine._log_rows import _parse_all
from durable.engine._recorded import Recorded

Times = tuple[float, float]
"""Microseconds of wall-clock and of CPU time (``time.process_time``)."""

TARGET_US = 4.0
"""Target (c): replay per step above plain calls."""

_COLUMNS = """
CREATE TABLE lean (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
    path TEXT, input_hash TEXT, output TEXT, data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID
"""


def _timed(fn: Callable[[], Any], per: int) -> Times:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - w) / per * 1e6, (time.process_time() - c) / per * 1e6


def _resume(src: str, n: int) -> Times:
    """The time to resume the waiting run of ``n`` steps in a copy of ``src`` (not per step)."""
    with tempfile.TemporaryDirectory() as dir:
        shutil.copytree(src, dir, dirs_exist_ok=True)
        return durable_replay(dir, n)


def _lean_copy(db: sqlite3.Connection) -> None:
    """The run's rows in the column layout: a step's completion keeps path, input hash and output apart."""
    db.execute(_COLUMNS)
    for seq, type_, data in db.execute("SELECT seq, type, data FROM events WHERE run_id = 'r'").fetchall():
        d = pydantic_core.from_json(data)
        lean: tuple[Any, ...] = (None, None, None, data)
        if type_ == "step.completed" and "output" in d:
            output = pydantic_core.to_json(d.pop("output")).decode()
            lean = (d.pop("path"), d.pop("input_hash"), output, pydantic_core.to_json(d).decode())
        db.execute("INSERT INTO lean VALUES ('r', ?, ?, ?, ?, ?, ?)", (seq, type_, *lean))


def _lean_replay(db: sqlite3.Connection) -> dict[str, tuple[str, Any]]:
    """Read, parse and index the column layout: path to (input hash, output); other rows parsed whole."""
    rows = db.execute(
        "SELECT seq, type, path, input_hash, output, CASE WHEN path IS NULL THEN data END "
        "FROM lean WHERE run_id = 'r' ORDER BY seq"
    ).fetchall()
    outputs = pydantic_core.from_json("[" + ",".join(r[4] or r[5] for r in rows) + "]")
    index: dict[str, tuple[str, Any]] = {}
    for (_, _, path, ih, _, _), out in zip(rows, outputs, strict=True):
        if path is not None:
            index[path] = (ih, out)
    return index


def _check_lean(db: sqlite3.Connection, rec: Recorded) -> None:
    """Refuse an estimate whose layout lost what replay compares: every step's input hash and output."""
    lean = _lean_replay(db)
    whole = {p: (d["input_hash"], d["output"]) for p, d in rec.steps_completed.items()}
    if lean != whole:
        raise AssertionError("the column layout does not hold every step's input hash and output")


def measure(steps: int, rounds: int) -> dict[str, list[Times]]:
    """Every part's time per step in each round (the rounds take turns in one process)."""
    parts: dict[str, list[Times]] = {
        k: [] for k in ("durable replay", "plain await", "read", "parse", "index", "lean read+parse+index")
    }
    with tempfile.TemporaryDirectory() as full, tempfile.TemporaryDirectory() as empty:
        waiting_run(full, steps)
        waiting_run(empty, 0)
        db = sqlite3.connect(os.path.join(full, "events.db"))
        _lean_copy(db)
        query = "SELECT seq, type, data FROM events WHERE run_id = 'r' ORDER BY seq"
        rows = db.execute(query).fetchall()
        _check_lean(db, Recorded.from_rows(rows, "r"))

        async def plain_loop() -> Times:
            w, c = time.perf_counter(), time.process_time()
            for i in range(steps):
                await plain(i)
            return (time.perf_counter() - w) / steps * 1e6, (time.process_time() - c) / steps * 1e6

        for _ in range(rounds):
            whole, none = _resume(full, steps), _resume(empty, 0)
            parts["durable replay"].append(((whole[0] - none[0]) / steps, (whole[1] - none[1]) / steps))
            parts["plain await"].append(asyncio.run(plain_loop()))
            parts["read"].append(_timed(lambda: db.execute(query).fetchall(), steps))
            parsed = _timed(lambda: _parse_all(rows, "r"), steps)
            built = _timed(lambda: Recorded.from_rows(rows, "r"), steps)
            parts["parse"].append(parsed)
            parts["index"].append((built[0] - parsed[0], built[1] - parsed[1]))
            parts["lean read+parse+index"].append(_timed(lambda: _lean_replay(db), steps))
        db.close()
    return parts


def report(parts: dict[str, list[Times]]) -> list[tuple[str, float, float]]:
    """The medians, the calls' share (what is left), and the column layout's estimate."""
    m = {k: tuple(statistics.median(v[i] for v in vals) for i in (0, 1)) for k, vals in parts.items()}
    rows = [(k, m[k][0], m[k][1]) for k in ("read", "parse", "index")]
    calls = tuple(m["durable replay"][i] - m["read"][i] - m["parse"][i] - m["index"][i] for i in (0, 1))
    rows.append(("calls (what is left)", calls[0], calls[1]))
    rows.append(("durable replay", m["durable replay"][0], m["durable replay"][1]))
    rows.append(("plain await", m["plain await"][0], m["plain await"][1]))
    replay_above = tuple(m["durable replay"][i] - m["plain await"][i] for i in (0, 1))
    rows.append(("durable replay above plain calls", replay_above[0], replay_above[1]))
    lean = m["lean read+parse+index"]
    rows.append(("column layout: read + parse + index", lean[0], lean[1]))
    estimate = tuple(lean[i] + calls[i] - m["plain await"][i] for i in (0, 1))
    rows.append(("column layout's estimate above plain calls", estimate[0], estimate[1]))
    return rows


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("steps", nargs="?", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    rows = report(measure(args.steps, args.rounds))
    print(f"{args.steps} replayed steps, median of {args.rounds} rounds in one process, µs per step\n")
    print("| part | wall | CPU |\n|---|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    print(f"\nTarget (c): replay ≤ {TARGET_US:g} µs per step above plain calls.")


if __name__ == "__main__":
    main()
