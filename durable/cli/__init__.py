"""``little``: read and maintain a data directory from the shell.

Every command takes ``--data-dir`` (default ``.little-workflow``) and
``--json``. A bad argument or an unknown run id prints one line to stderr and
exits with status 1; never a traceback.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .. import __version__
from .._open_world import local_world
from ..errors import DurableError
from . import _history, _runs, _runtime, _ui  # noqa: F401  (importing them registers their commands)
from ._registry import COMMANDS, HUMAN, CliError

# -- output -------------------------------------------------------------------


def _human(name: str, data: Any) -> str:
    if name in HUMAN:
        return HUMAN[name](data)
    if isinstance(data, dict):
        out = []
        for k, v in data.items():
            if isinstance(v, list | dict):
                out.append(f"{k}:" + ("" if v else " (none)"))
                items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
                out += [f"  {x}" if key is None else f"  {key}: {x}" for key, x in items]
            else:
                out.append(f"{k}: {v}")
        return "\n".join(out)
    return json.dumps(data, indent=2)


_ORDER = [
    "runs",
    "events",
    "replay",
    "checkpoints",
    "restore",
    "fork",
    "compact",
    "gc",
    "verify",
    "worker",
    "cancel",
    "resume",
    "ui",
]
"""The order commands are listed in (reading first, then time travel and maintenance)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (exit status 2, reported as 1)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``little`` argument parser with every registered command."""
    parser = _Parser(prog="little", description="Inspect and maintain durable runs.")
    parser.add_argument("--version", action="version", version=f"little {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    order = {name: i for i, name in enumerate(_ORDER)}
    for name in sorted(COMMANDS, key=lambda n: (order.get(n, len(order)), n)):
        help_, add_args, _ = COMMANDS[name]
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument(
            "--data-dir",
            default=".little-workflow",
            help="the data directory (default .little-workflow)",
        )
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")
        add_args(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``little`` with ``argv``; return the exit status.

    When the reader of the output goes away (``little events --json | head``),
    ``little`` stops quietly with status 141, as a program stopped by
    ``SIGPIPE`` does.
    """
    try:
        return _run(argv)
    except BrokenPipeError:
        # Point stdout at /dev/null so that the interpreter's last flush stays quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0) and 1
    if a.command is None:
        parser.print_help()
        return 1
    data_dir = Path(a.data_dir)
    if a.command != "worker" and not (data_dir / "events.db").exists():
        print(
            f"little: no durable data directory at {str(data_dir)!r} (no events.db); pass --data-dir",
            file=sys.stderr,
        )
        return 1
    try:
        world = local_world(data_dir)
    except DurableError as exc:
        print(f"little: {exc}", file=sys.stderr)
        return 1
    try:
        if getattr(a, "watch", False):
            return _watch(world, a)
        data = COMMANDS[a.command][2](world, a)
    except (DurableError, CliError) as exc:
        print(f"little: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        world.close()
    if data is not None:
        print(json.dumps(data, indent=2, default=str) if a.json else _human(a.command, data))
    return int(getattr(a, "exit_status", 0))


def _watch(world: Any, a: argparse.Namespace, sleep: Any = time.sleep, clock: Any = time.monotonic) -> int:
    """Print the command's output again whenever it changes (``--watch``).

    Stops at Ctrl-C, after ``--timeout`` seconds, or, for ``replay``, once the
    run no longer runs. ``--json`` prints one compact object a line.
    """
    if a.interval <= 0 or a.timeout < 0:
        raise CliError("--interval must be above 0 and --timeout at least 0")
    deadline = clock() + a.timeout
    last = None
    try:
        while True:
            data = COMMANDS[a.command][2](world, a)
            text = json.dumps(data, default=str) if a.json else _human(a.command, data)
            if text != last:
                if last is not None and not a.json:
                    print(f"-- {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}")
                print(text, flush=True)
                last = text
            finished = isinstance(data, dict) and data.get("status") not in (None, "running")
            if finished or clock() >= deadline:
                return 0
            sleep(a.interval)
    except KeyboardInterrupt:  # Ctrl-C is how people stop watching
        return 0
