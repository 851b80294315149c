"""``little lint PATH_OR_MODULE``: the determinism checks of ``durable.ops._lint`` from the shell.

Exit status 1 on any finding. ``--format github`` prints one workflow command
a finding (``::error file=...,line=...``), which GitHub Actions shows on the
pull request's lines.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..ops import lint_files, lint_paths
from ._registry import command


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="a .py file, a directory (searched recursively) or a module name")
    p.add_argument(
        "--format",
        choices=["text", "github"],
        default="text",
        help="text (path:line:col: CODE [rule] message) or github (workflow commands for GitHub Actions)",
    )


def _escape_github(text: str, *, prop: bool = False) -> str:
    """``text`` escaped as GitHub's workflow commands want (properties escape ``:`` and ``,`` too)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _human(data: dict[str, Any]) -> str:
    lines = []
    for f in data["findings"]:
        if data["format"] == "github":
            where = f"file={_escape_github(f['path'], prop=True)},line={f['line']},col={f['col']}"
            title = _escape_github(f"{f['code']} {f['rule']}", prop=True)
            lines.append(f"::error {where},title={title}::{_escape_github(f['message'])}")
        else:
            lines.append(f"{f['path']}:{f['line']}:{f['col']}: {f['code']} [{f['rule']}] {f['message']}")
    if data["format"] == "text":
        n = len(data["findings"])
        lines.append(
            f"{n} finding{'s' if n != 1 else ''} in {data['files']} file{'s' if data['files'] != 1 else ''}"
        )
    return "\n".join(lines)


@command(
    "lint",
    "check workflow and step bodies for clock, randomness, environment and I/O calls, "
    "missing awaits and steps in loops (reads the source, never imports it)",
    _args,
    human=_human,
    standalone=True,
)
def _lint(world: None, a: argparse.Namespace) -> Any:
    files = lint_files(a.target)
    findings = lint_paths(files)
    a.exit_status = 1 if findings else 0
    return {"format": a.format, "files": len(files), "findings": [f.as_dict() for f in findings]}
