"""The CLI reference page matches the commands' help."""

from __future__ import annotations

from pathlib import Path

from durable.cli._docs import render_markdown
from durable.cli._registry import COMMANDS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"


def test_cli_reference_page_is_fresh() -> None:
    """docs/reference/cli.md equals what `python scripts/gen_cli_docs.py` would write now."""
    assert PAGE.read_text() == render_markdown(), "stale CLI reference: run python scripts/gen_cli_docs.py"


def test_cli_reference_documents_every_command() -> None:
    """Each registered command has its own section in the page."""
    text = render_markdown()
    for name in COMMANDS:
        assert f"## little {name}\n" in text


def test_the_home_page_names_every_core_dependency() -> None:
    """docs/index.md's list of dependencies is pyproject.toml's, name for name."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.match(r"[A-Za-z0-9_.-]+", d)[0].lower() for d in deps}  # type: ignore[index]
    sentence = re.search(r"the dependencies are (.*?)\.\n", (root / "docs" / "index.md").read_text(), re.S)
    assert sentence is not None
    assert set(re.findall(r"`([^`]+)`", sentence[1])) == names
