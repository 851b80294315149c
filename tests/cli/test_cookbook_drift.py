"""The drift recipe runs offline from the repository root and shows both ways out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_drift_recipe_shows_the_error_and_both_ways_out() -> None:
    """``python cookbook/drift.py`` exits 0 and prints the refusal, the changes and both recoveries."""
    done = subprocess.run(
        [sys.executable, "cookbook/drift.py"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "refused before anything ran (calls made: [])" in out
    assert '- tools.score.signature: "(candidate_id: str) -> int" → ' in out
    assert '- models.worker: "gpt-5" → "gpt-4o-mini"' in out
    assert "resumed: 'total score 8'; calls made: ['publish']" in out
    assert "new run: 'total score 8'; calls made: ['score ada', 'score grace', 'summarize', 'publish']" in out
