"""Write docs/reference/cli.md from the `little` commands' help.

Run from the repository root: ``python scripts/gen_cli_docs.py``.
"""

from __future__ import annotations

from pathlib import Path

from durable.cli._docs import render_markdown

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "cli.md"


def main() -> None:
    """Render the page and write it."""
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(render_markdown())
    print("wrote docs/reference/cli.md")


if __name__ == "__main__":
    main()
