"""Debounce across processes: starts from several processes at once make one run (SQLite and Postgres)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.unhappy import APP, ROOT, Procs

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes of the unhappy app on each backend."""
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def test_starts_from_several_processes_with_one_key_make_one_run(procs: Procs) -> None:
    """Six processes start a debounced digest at once: one run id for all, one run, one of their inputs."""
    starters = [
        subprocess.Popen(
            [sys.executable, "-m", APP, "start-digest", f"batch-{i}", "1.5"],
            cwd=ROOT,
            env=procs.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    ids = set()
    for p in starters:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        ids.add(out.strip())
    assert len(ids) == 1
    (run_id,) = ids
    procs.worker()
    st = procs.ends(run_id, 30)
    assert st.status == "completed"
    procs.settle()
    digests = procs.bodies(wf="digest")
    assert len(digests) == 1
    assert digests[0]["batch"] in {f"batch-{i}" for i in range(6)}
