"""`little doctor` right after a SIGKILL of a run's process: never the all-clear, and fixes that work."""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.runtime.unhappy import ROOT, Procs, wait_for

pytestmark = pytest.mark.slow

HERE = "tests.helpers.procs.run_here"


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def _drive_then_kill(procs: Procs, workflow: str, value: object, run_id: str, **cut: str) -> None:
    """Drive ``workflow`` with run_workflow in a process of its own; SIGKILL it in the call ``cut`` names."""
    p = subprocess.Popen(
        [sys.executable, "-m", HERE, workflow, json.dumps(value), run_id],
        cwd=ROOT,
        env=procs.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.procs.append(p)
    wait_for(lambda: procs.bodies(**cut), 30, f"the call {cut} to start")
    procs.kill(p)
    # `little runs` says orphaned once the run's lock is free (a Postgres lease runs out first)
    wait_for(lambda: durable.runtime.driver_of(procs.world, run_id)["driver"] == "orphaned", 30, "orphaned")


def _doctor(procs: Procs) -> list[dict[str, object]]:
    sick = procs.little("doctor", "--json")
    assert sick.returncode == 1, sick.stdout + sick.stderr
    found: list[dict[str, object]] = json.loads(sick.stdout)
    return found


def test_a_run_killed_inside_a_plain_tool_gets_its_resolutions_at_once_and_they_work(procs: Procs) -> None:
    """As soon as the run is orphaned, doctor says its next drive blocks it and prints `little resolve`."""
    _drive_then_kill(procs, "paying", 250, "k", tool="charge")
    (found,) = _doctor(procs)
    assert (found["kind"], found["reason"], found["key"]) == ("unserved", "unknown_commit", "tool:charge#0")
    fixes = found["fixes"]
    assert isinstance(fixes, list)
    assert fixes[0].startswith(
        f"little resolve k 'tool:charge#0' --happened --result JSON --workflow {HERE}:paying"
    )
    done = procs.little_line(fixes[0].replace("JSON", shlex.quote(json.dumps("charged 250"))))
    assert done.returncode == 0, done.stderr
    assert procs.status("k").status == "completed"
    assert len(procs.bodies(tool="charge")) == 1  # the tool ran once: the resolution is its receipt
    assert procs.little("doctor").returncode == 0


def test_a_run_killed_inside_a_step_is_listed_at_once_and_the_worker_it_names_finishes_it(
    procs: Procs,
) -> None:
    """Doctor names the worker to start; started as printed, it recovers the run, and doctor is clean."""
    _drive_then_kill(procs, "thinking", 4, "t", step="think")
    (found,) = _doctor(procs)
    assert (found["kind"], found["reason"], found["workflow"]) == ("unserved", "no_worker", "thinking")
    fixes = found["fixes"]
    assert isinstance(fixes, list) and fixes[0].startswith(f"little worker {HERE}:thinking")
    (procs.tmp / "go").touch()
    dsn = {"DURABLE_DSN": procs.env["DURABLE_TEST_PG_DSN"]} if procs.kind == "postgres" else {}
    worker = subprocess.Popen(  # the fix as printed, a worker that serves until SIGTERM
        [sys.executable, "-m", "durable.cli", *shlex.split(fixes[0])[1:]],
        cwd=ROOT,
        env={**procs.env, **dsn},
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.procs.append(worker)
    assert procs.ends("t", 60).status == "completed"
    assert asyncio.run(durable.handle("t", world=procs.world).result(timeout=10)) == 5
    assert procs.little("doctor").returncode == 0
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
