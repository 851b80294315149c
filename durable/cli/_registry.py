"""The registry of ``little`` commands, and what their handlers share.

Command modules register with ``@command``; ``durable.cli`` builds the parser
from the registry and prints what handlers return.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any, TextIO

from ..engine import WorldCore
from ..errors import RunNotFoundError

Handler = Callable[[Any, argparse.Namespace], Any]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}
"""Command name → (help, add-arguments, handler); each handler returns JSON-able data."""
HUMAN: dict[str, Callable[[Any], str]] = {}
"""Command name → how its data is shown without ``--json`` (when not the default)."""
RAW: set[str] = set()
"""Commands that open the data directory themselves; their handler gets ``None`` for the world."""
STANDALONE: set[str] = set()
"""Commands that read no data directory at all (``lint``); their handler gets ``None`` for the world."""
CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {}
"""Command name → a check of its parsed arguments; a ``CliError`` it raises is a usage error."""


class CliError(Exception):
    """A one-line error for the user (exit status 1)."""


def command(
    name: str,
    help: str,
    args: Callable[[argparse.ArgumentParser], None] | None = None,
    *,
    human: Callable[[Any], str] | None = None,
    raw: bool = False,
    standalone: bool = False,
    check: Callable[[argparse.Namespace], None] | None = None,
) -> Callable[[Handler], Handler]:
    """Register a ``little`` subcommand (``human`` formats its data for people).

    A handler that prints as it goes (``events --follow``) returns ``None``.
    ``check`` looks at the parsed arguments before the data directory is
    opened; the ``CliError`` it raises is reported as a usage error.
    ``standalone`` marks a command that opens no data directory.
    """

    def register(fn: Handler) -> Handler:
        COMMANDS[name] = (help, args or (lambda p: None), fn)
        if human is not None:
            HUMAN[name] = human
        if check is not None:
            CHECKS[name] = check
        if raw:
            RAW.add(name)
        if standalone:
            STANDALONE.add(name)
        return fn

    return register


def run_id_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="the run's id (see `little runs`)")


_STATUS_STYLES = {
    "running": "blue",
    "enqueued": "magenta",
    "interrupted": "yellow",
    "blocked": "bold yellow",
    "completed": "green",
    "failed": "bold red",
    "cancelled": "dim",
}


def terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stdout) is a terminal that can redraw (not piped, not ``TERM=dumb``)."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return (sys.stdout if stream is None else stream).isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream is no terminal
        return False


def colour(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stdout) is a ``terminal`` that takes colour (no ``NO_COLOR``)."""
    if os.environ.get("NO_COLOR"):
        return False
    return terminal(stream)


def _rich_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    from rich.console import Console
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for c in columns:
        t.add_column(c.upper(), overflow="fold")
    for r in rows:
        cells = []
        for c in columns:
            v = str(r.get(c, ""))
            style = _STATUS_STYLES.get(v) if c == "status" else None
            cells.append(f"[{style}]{escape(v)}[/]" if style else escape(v))
        t.add_row(*cells)
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=shutil.get_terminal_size().columns).print(t)
    return out.getvalue().rstrip()


def escape(text: str) -> str:
    """``text`` with Rich's markup brackets escaped (run ids may hold ``[``)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Rows as an aligned table with upper-case headers (``(none)`` when empty).

    On a terminal that takes colour it is a Rich table with coloured statuses;
    piped, it is plain text without escape codes.
    """
    if not rows:
        return "(none)"
    if colour():
        return _rich_table(rows, columns)
    return plain_table(rows, columns)[0]


def plain_table(
    rows: list[dict[str, Any]], columns: list[str], widths: list[int] | None = None
) -> tuple[str, list[int]]:
    """Rows as plain aligned text, and its column widths.

    Given the ``widths`` of the table's first part, the rows continue it
    (aligned to them, without a header line): a table printed as it is read.
    """
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    lines = []
    if widths is None:
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        lines.append("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines), widths


def read_rows(world: WorldCore, run_id: str) -> list[tuple[int, str, str]]:
    rows = world.log.read(run_id)
    if not rows:
        raise RunNotFoundError(f"no run {run_id!r} in this data directory; list runs with `little runs`.")
    return rows
