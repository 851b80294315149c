"""The CLI reference page, rendered from the ``little`` commands' own help.

``scripts/gen_cli_docs.py`` writes it to ``docs/reference/cli.md``; a test
fails when the page on disk differs from what the commands say now.
"""

from __future__ import annotations

from . import build_group
from ._click import help_text

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


def render_markdown() -> str:
    """The whole CLI reference page as Markdown."""
    group = build_group()
    parts = [_INTRO, "```text", help_text(group, None, WIDTH), "```"]
    for name in sorted(group.commands):
        help_ = group.commands[name].help or ""
        parts += ["", f"## little {name}", "", help_, "", "```text", help_text(group, name, WIDTH), "```"]
    return "\n".join(parts) + "\n"
