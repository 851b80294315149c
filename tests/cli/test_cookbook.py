"""Every cookbook recipe runs and exits 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(p for p in (ROOT / "cookbook").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipe_runs(recipe: Path, tmp_path: Path) -> None:
    """The recipe runs offline from the repository root and exits 0."""
    proc = subprocess.run(
        [sys.executable, str(recipe)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
