"""A progress bar on stderr for a command that works through many runs.

Shown only when stderr is a terminal that can redraw and there are at least
two runs: piped (``little compact --all --json | jq``), run by a script or
under ``TERM=dumb``, nothing at all is written to stderr, so the output a
script reads stays clean. ``NO_COLOR`` keeps the bar and drops its colours,
as it does for the tables. The bar is erased when the work is done, before
the command prints its result on stdout, so the two never mix.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ._registry import colour, terminal

Update = Callable[[int, int], None]
"""Called with (runs done, runs in all) as the work goes on."""


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Update]:
    """A callback that draws ``label`` and a bar of runs done on stderr, for the block.

    The bar starts at the first call that says there are two or more runs;
    until then, and when stderr is no terminal, the callback does nothing.
    """
    bar: Any = None
    task: Any = None

    def update(done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:
            if total < 2 or not terminal(sys.stderr):
                return
            bar = _start(label, total)
            task = bar.task_ids[0]
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


def _start(label: str, total: int) -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(file=sys.stderr, force_terminal=True, no_color=not colour(sys.stderr), highlight=False)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    bar.add_task(label, total=total)
    bar.start()
    return bar
