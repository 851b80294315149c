"""Every ```python block of README.md and docs/ runs as written, or says it is a fragment.

The convention: a block whose first line is a comment starting with
``# fragment`` (``# fragment: inside a @workflow body``) is part of a
program, shown to explain it, and is not run. A block that only includes a
cookbook recipe (``--8<-- "cookbook/x.py"``) runs with the recipes
(``test_cookbook.py``). Every other block is a complete program: it runs on
its own in a new process, in an empty temporary working directory, offline,
and must exit 0 within the timeout.

The blocks are found with markdown-it-py (what ``rich`` already depends on),
so fences indented under list items are found as the docs render them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60
"""Seconds a block may take (each should take a few)."""
INCLUDE = re.compile(r'^-{2}8<-{2} "(?P<path>[^"]+)"$')
EXTRAS = {
    "openai",
    "anthropic",
    "pydantic_ai",
    "langchain",
    "langchain_core",
    "langgraph",
    "sqlite_vec",
    "apsw",
    "cryptography",
    "psycopg",
    "starlette",
}
"""Modules of the optional extras: a block that needs one is skipped where it is not installed."""


class Block(NamedTuple):
    """One ```python block: where it is and what it holds."""

    page: str
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(text: str, page: str) -> list[Block]:
    """The ```python blocks of one Markdown text, with the line each starts on (1-based)."""
    blocks = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type == "fence" and token.info.split()[:1] == ["python"] and token.map is not None:
            blocks.append(Block(page, token.map[0] + 1, token.content))
    return blocks


def is_fragment(code: str) -> bool:
    """Whether a block says on its first line that it is not a program (``# fragment…``)."""
    first = code.lstrip("\n").split("\n", 1)[0].strip()
    return first.startswith("# fragment")


def included(code: str) -> list[str] | None:
    """The files a block only includes (snippets), or ``None`` when it holds code of its own."""
    lines = [line.strip() for line in code.strip().splitlines()]
    found = [INCLUDE.match(line) for line in lines]
    if not lines or not all(found):
        return None
    return [m["path"] for m in found if m is not None]


BLOCKS = [b for page in _pages() for b in python_blocks(page.read_text(), page.relative_to(ROOT).as_posix())]
PROGRAMS = [b for b in BLOCKS if not is_fragment(b.code) and included(b.code) is None]


def _offline_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a block: no keys or proxies of this process, no little settings."""
    drop = ("LITTLE_", "OPENAI", "ANTHROPIC", "DURABLE_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(drop)}
    env["HOME"] = str(tmp_path)
    return env


def _missing_extra(stderr: str) -> str | None:
    m = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", stderr)
    return m[1] if m and m[1].split(".")[0] in EXTRAS else None


@pytest.mark.parametrize("block", PROGRAMS, ids=lambda b: b.id)
def test_a_python_block_runs_as_a_program(block: Block, tmp_path: Path) -> None:
    """The block runs on its own in an empty directory and exits 0 (mark it ``# fragment`` if it cannot)."""
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "block.py"
    script.write_text(block.code)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        env=_offline_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    extra = _missing_extra(proc.stderr)
    if proc.returncode != 0 and extra is not None:
        pytest.skip(f"needs the optional module {extra!r}")
    assert proc.returncode == 0, f"{block.id} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if included(b.code)], ids=lambda b: b.id)
def test_a_block_that_includes_a_recipe_includes_one_the_cookbook_tests_run(block: Block) -> None:
    """An include-only block names files under cookbook/, which test_cookbook.py runs."""
    for path in included(block.code) or []:
        assert path.startswith("cookbook/") and (ROOT / path).is_file(), f"{block.id}: {path}"


def test_the_runner_finds_blocks_under_list_items_and_marks() -> None:
    """Fences indented under a list item are found; fragments and includes are told apart."""
    text = (
        "# t\n\n1. item\n\n    ```python\n    print(1)\n    ```\n\n"
        "```python\n# fragment: inside a body\nx = await f()\n```\n\n"
        '```python\n--8<-- "cookbook/kill_resume.py"\n```\n\n```console\n$ python\n```\n'
    )
    found = python_blocks(text, "t.md")
    assert [(b.line, b.code) for b in found] == [
        (5, "print(1)\n"),
        (9, "# fragment: inside a body\nx = await f()\n"),
        (14, '--8<-- "cookbook/kill_resume.py"\n'),
    ]
    assert [is_fragment(b.code) for b in found] == [False, True, False]
    assert [included(b.code) for b in found] == [None, None, ["cookbook/kill_resume.py"]]
