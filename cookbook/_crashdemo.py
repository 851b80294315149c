"""Shared by the agent recipes: count real calls, stop at a chosen call, kill, resume.

Not a recipe itself. Each agent recipe runs in two ways:

- ``python cookbook/NAME.py`` is the demo: it starts itself as a child
  process, lets the agent run until a chosen call is in flight, kills the
  child with SIGKILL, resumes the same run in this process and prints how
  often each model and tool call really ran.
- ``python cookbook/NAME.py --data-dir DIR [--stop-at CALL]`` is one attempt
  of the run in ``DIR``; with ``--stop-at`` it prints ``STOPPED CALL`` when
  that call starts and waits to be killed (the recipe's tests use this).

Every model and tool body calls ``ran(name)``, which appends the name to
``DIR/calls.log`` (fsynced), so counts survive the kill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

_data_dir: Path | None = None
_stop_at = ""


def configure(description: str) -> tuple[Path | None, str]:
    """Read ``--data-dir`` and ``--stop-at`` from the command line."""
    global _data_dir, _stop_at
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data-dir", type=Path, help="run one attempt of the agent in this folder")
    parser.add_argument("--stop-at", default="", help="stop (and wait to be killed) when this call starts")
    args = parser.parse_args()
    _data_dir, _stop_at = args.data_dir, args.stop_at
    return _data_dir, _stop_at


def use(data_dir: Path) -> None:
    """Count calls in ``data_dir`` (the demo's own resume)."""
    global _data_dir, _stop_at
    _data_dir, _stop_at = data_dir, ""


async def ran(name: str) -> None:
    """Record that the body of call ``name`` really ran; stop there when asked to."""
    note(name)
    if name == _stop_at and counts(_data_dir)[name] == 1:
        for _ in range(3):  # event-loop turns (no time passes): finished work is written first
            await asyncio.sleep(0)
        print(f"STOPPED {name}", flush=True)
        await asyncio.Event().wait()  # until the parent kills this process


def reached(name: str) -> None:
    """``ran`` for code outside the event loop (a local server's thread): blocks that thread there."""
    note(name)
    if name == _stop_at and counts(_data_dir)[name] == 1:
        print(f"STOPPED {name}", flush=True)
        threading.Event().wait()  # until the parent kills this process


def counts(data_dir: Path | None) -> Counter[str]:
    """How often each call's body ran, across every process that worked on the run."""
    assert data_dir is not None
    log = data_dir / "calls.log"
    return Counter(log.read_text().split() if log.exists() else [])


def kill_child_at(script: str, stop_at: str) -> Path:
    """Run ``script`` in a child process until ``stop_at`` starts, then SIGKILL it."""
    data_dir = Path(tempfile.mkdtemp(prefix="little-agent-"))
    child = subprocess.Popen(
        [sys.executable, script, "--data-dir", str(data_dir), "--stop-at", stop_at],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=30):
            child.kill()
            raise SystemExit(f"the agent never reached {stop_at!r}")
    line = child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    child.communicate()
    if line != f"STOPPED {stop_at}":
        raise SystemExit(f"the agent ended before {stop_at!r}: {line!r}")
    return data_dir


def report(data_dir: Path, in_flight: str) -> int:
    """Print how often each call ran; 0 when only the call in flight at the kill ran twice."""
    seen = counts(data_dir)
    print("\nHow often each call's body really ran, across both processes:")
    for name, n in seen.items():
        note = "  <- in flight when the process was killed, so issued again" if name == in_flight else ""
        print(f"  {name:<40} {n}{note}")
    repeated = sorted(name for name, n in seen.items() if n > 1 and name != in_flight)
    if repeated:
        print(f"\nUnexpected: these committed calls ran again: {repeated}")
        return 1
    print("\nNo committed model or tool call ran twice: the resume replayed them from the log.")
    return 0


def note(name: str) -> None:
    """Record that ``name`` happened, from any thread (no stopping here)."""
    assert _data_dir is not None
    with open(_data_dir / "calls.log", "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


def main(script: str, doc: str, attempt: Callable[[Path], Awaitable[str]], stop_at: str) -> int:
    """A recipe's ``main``: one attempt when given ``--data-dir``, else the kill-and-resume demo."""
    data_dir, _ = configure(doc.splitlines()[0])
    if data_dir is not None:  # one attempt, as the tests and the demo's child run it
        print(json.dumps({"answer": asyncio.run(attempt(data_dir))}), flush=True)
        return 0
    print(f"Starting the agent in a child process; it will be killed during {stop_at}.")
    data_dir = kill_child_at(script, stop_at)
    print(f"Killed it with SIGKILL. The run's log is in {data_dir}.")
    print("Resuming the same run id in this process ...")
    use(data_dir)
    print(f"Answer: {asyncio.run(attempt(data_dir))}")
    return report(data_dir, stop_at)
