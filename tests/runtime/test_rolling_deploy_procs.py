"""A rolling deploy under SIGKILLs: workers of two code versions alive at once (SQLite, Postgres).

Runs are submitted all along; workers of the old and the new code of ``deploy_app.rolling`` serve
them while one worker after another is SIGKILLed, each replaced by a worker of its own code (each
version keeps a live worker throughout). The new code inserted a call, made a step's signature
compatibly larger and renamed another's parameter: so there are old runs the new code cannot
replay, new runs the old code cannot, and old runs the new code continues (its manifest then
becomes the run's). Every run must complete: none is failed or blocked because a worker of the
other version saw it first.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.helpers.procs import deploy_app
from tests.runtime.unhappy import Procs

pytestmark = pytest.mark.slow

APP = "tests.helpers.procs.deploy_app"
KILLS = 6
PACE = 0.2
"""Seconds between two submitted runs, from the first worker's start to the last kill."""


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def test_a_rolling_deploy_under_kills_finishes_every_run(procs: Procs) -> None:
    """Every run completes with its output, whichever code made which of its calls."""
    rng = random.Random(51)
    env = {"DURABLE_TEST_QUEUES": "rolling"}
    alive = {"old": [procs.worker(APP, DURABLE_TEST_CODE="old", **env) for _ in range(2)], "new": []}
    handles: list[durable.RunHandle] = []
    killing = threading.Event()

    def submit() -> None:
        while not killing.is_set() or len(handles) < 10:
            run = durable.start_workflow(
                deploy_app.rolling, len(handles), world=procs.world, queue=deploy_app.rolling_queue
            )
            handles.append(run)
            time.sleep(PACE)

    submitter = threading.Thread(target=submit)
    submitter.start()
    try:
        time.sleep(1.0)  # old runs in flight: the deploy starts, new workers join the old ones
        alive["new"] = [procs.worker(APP, DURABLE_TEST_CODE="new", **env) for _ in range(2)]
        for k in range(KILLS):
            version = "old" if k % 3 != 2 else "new"  # mostly old ones, as a deploy replaces them
            victim = alive[version].pop(rng.randrange(len(alive[version])))
            procs.kill(victim)  # its version still has a live worker
            alive[version].append(procs.worker(APP, DURABLE_TEST_CODE=version, **env))
            time.sleep(rng.uniform(0.1, 0.4))
    finally:
        killing.set()
        submitter.join()
    ends = {h.run_id: procs.ends(h.run_id, 180) for h in handles}
    stuck = {rid: (st.status, st.reason, st.detail) for rid, st in ends.items() if st.status != "completed"}
    assert not stuck, f"{stuck}\n{procs.err_text()[-4000:]}"
    outputs = [asyncio.run(h.result(timeout=10)) for h in handles]
    assert outputs == [(i + deploy_app.TICKS) * 10 + 1 for i in range(len(handles))]
    taken = sum(1 for h in handles if any(e.type == "drift.accepted" for e in procs.world.events(h.run_id)))
    said = procs.err_text()
    left = sum(1 for h in handles if f"leaves run {h.run_id} alone" in said)
    shown = f"{len(handles)} runs, {KILLS} kills, {taken} taken over, {left} left to the other code"
    print(f"\n{procs.kind}: {shown}")  # with -s: how much the two versions met
