"""Debounce across processes: starts from several processes at once make one run (SQLite and Postgres)."""

from __future__ import annotations

import json
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


def test_debounce_max_bounds_a_burst_started_from_another_process_than_the_worker(procs: Procs) -> None:
    """debounce_max holds for starts made by a process without a worker: the run starts at the cap.

    Starts every 50 ms for 3 s with debounce 0.3 s and debounce_max 0.6 s: the first run starts
    about 0.6 s after the first start, not after the burst, and the burst makes several runs.
    """
    procs.worker()
    starter = subprocess.run(
        [sys.executable, "-m", "tests.helpers.procs.debounce_burst", "3", "0.05", "0.3", "0.6"],
        cwd=ROOT,
        env=procs.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert starter.returncode == 0, starter.stderr
    burst = json.loads(starter.stdout)
    ids = list(dict.fromkeys(burst["ids"]))
    for run_id in ids:
        assert procs.ends(run_id, 30).status == "completed"
    first_run = min(b["t"] for b in procs.bodies(wf="digest"))
    assert 0.5 <= first_run - burst["first"] < 1.5  # capped at 0.6 s; without the cap, after 3.3 s
    assert len(ids) >= 3  # each cap ends a run's burst; the next start makes the next run
