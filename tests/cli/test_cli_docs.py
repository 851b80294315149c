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
