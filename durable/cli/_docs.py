"""The CLI reference page, rendered from the ``little`` parser's own help.

``scripts/gen_cli_docs.py`` writes it to ``docs/reference/cli.md``; a test
fails when the page on disk differs from what the commands say now.
"""

from __future__ import annotations

import argparse
import functools

from . import build_parser

WIDTH = 88
"""The help text's line width, fixed so the page does not depend on the terminal."""

_INTRO = """\
# CLI reference

`little` reads and maintains a data directory from the shell. Every command
takes `--data-dir` (default `.little-workflow`) and `--json` for
machine-readable output. A bad argument or an unknown run id prints one line
on stderr and exits with status 1.

This page is generated from the commands' own help by
`python scripts/gen_cli_docs.py`; do not edit it by hand.
"""


def _help(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=WIDTH)
    return parser.format_help().rstrip()


def render_markdown() -> str:
    """The whole CLI reference page as Markdown."""
    parser = build_parser()
    parts = [_INTRO, "```text", _help(parser), "```"]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in sorted(subparsers.choices.items()):
        parts += ["", f"## little {name}", "", sub.description or "", "", "```text", _help(sub), "```"]
    return "\n".join(parts) + "\n"
