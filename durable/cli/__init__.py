"""``little``: read and maintain a data directory from the shell.

Every command takes ``--data-dir`` (default ``.little-workflow``) and
``--json``. A bad argument or an unknown run id prints one line to stderr and
exits with status 1; never a traceback. An encrypted data directory is opened
with the key in ``LITTLE_KEY`` or the file named by ``LITTLE_KEY_FILE`` (never
an argument: other users can read a command line). Everything printed has its
control characters escaped (``_safe``). The command line is Click (built from
the registry in ``_registry`` by ``_click``); tables are Rich tables with
coloured statuses on a terminal that takes colour, plain text when piped.
Commands that work through many runs (``gc``, ``compact --all``,
``verify --all``) draw a progress bar on stderr when it is a terminal
(``_progress``), and write nothing there when piped.
A new command is one module that registers with ``@command`` and is imported
below.
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
from typing import Any

from ..errors import DurableError
from ..security import codec_from_env
from ..worlds import local_world, postgres_world
from . import _crypto, _deploy, _diff, _history, _lint, _outbox_schedules, _runs, _runtime, _ui, _unblock  # noqa: F401  (importing registers commands)
from ._registry import COMMANDS, HUMAN, RAW, STANDALONE, CliError
from ._safe import escape, safe

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


def build_group(on_command: Any = None) -> Any:
    """The ``little`` Click group with every registered command (for ``--help`` and the docs)."""
    from ._click import build_group as build

    return build(on_command or (lambda name, a: None))


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


def _parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace | None, int]:
    """The parsed command, or ``None`` and the exit status (help, version, a usage error)."""
    import click

    parsed: list[argparse.Namespace] = []
    group = build_group(lambda name, a: parsed.append(a))
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        click.echo(group.get_help(click.Context(group, info_name="little")))
        return None, 1
    try:
        status = group.main(args, prog_name="little", standalone_mode=False)
    except click.UsageError as exc:
        where = (
            f"little {exc.ctx.info_name}" if exc.ctx is not None and exc.ctx.parent is not None else "little"
        )
        print(f"{where}: {escape(exc.format_message())} (see {where} --help)", file=sys.stderr)
        return None, 1
    except click.ClickException as exc:
        print(f"little: {escape(exc.format_message())}", file=sys.stderr)
        return None, 1
    except click.Abort:
        return None, 1
    if not parsed:
        return None, int(status or 0)
    return parsed[0], 0


def _run(argv: Sequence[str] | None) -> int:
    a, status = _parse(argv)
    if a is None:
        return status
    if a.command in STANDALONE:  # a command that reads no data directory (lint)
        try:
            data = COMMANDS[a.command][2](None, a)
        except (DurableError, CliError) as exc:
            _error(str(exc))
            return 1
        _print(a, data)
        return int(getattr(a, "exit_status", 0))
    data_dir = Path(a.data_dir)
    if a.dsn is None and a.command != "worker" and not (data_dir / "events.db").exists():
        _error(
            f"no durable data directory at {str(data_dir)!r} (no events.db); pass --data-dir "
            "(or --dsn for a Postgres world)"
        )
        return 1
    if a.command in RAW:  # a command that opens the data directory itself (rekey)
        try:
            data = COMMANDS[a.command][2](None, a)
        except (DurableError, CliError) as exc:
            _error(str(exc))
            return 1
        _print(a, data)
        return 0
    try:
        codec = codec_from_env()
        world = (
            local_world(data_dir, codec=codec)
            if a.dsn is None
            else postgres_world(a.dsn, schema=a.schema, codec=codec)
        )
    except DurableError as exc:
        _error(str(exc))
        return 1
    try:
        if getattr(a, "watch", False):
            return _watch(world, a)
        data = COMMANDS[a.command][2](world, a)
    except (DurableError, CliError) as exc:
        _error(str(exc))
        return 1
    finally:
        world.close()
    _print(a, data)
    return int(getattr(a, "exit_status", 0))


def _error(message: str) -> None:
    """One line to stderr, its control characters escaped."""
    print(f"little: {escape(message.split(chr(10))[0])}", file=sys.stderr)


def _print(a: argparse.Namespace, data: Any) -> None:
    """A command's data: JSON (which escapes control characters itself) or text for people."""
    if data is not None:
        print(json.dumps(data, indent=2, default=str) if a.json else _human(a.command, safe(data)))


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
            text = json.dumps(data, default=str) if a.json else _human(a.command, safe(data))
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
