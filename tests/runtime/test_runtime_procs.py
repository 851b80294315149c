"""The runtime across real processes: SIGKILL, two workers, limits from the bodies' own clocks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import durable
from tests.helpers.procs import runtime_app as app

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.helpers.procs.runtime_app:WORKFLOWS"


def env(tmp: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "DURABLE_TEST_DIR": str(tmp), "PYTHONPATH": str(ROOT), **extra}


def worker(tmp: Path, *queues: str, concurrency: int = 10, **extra: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "durable.cli", "worker", TARGET, "--data-dir", str(tmp / "data")]
    for q in queues:
        args += ["--queue", q]
    args += ["--concurrency", str(concurrency)]
    with open(tmp / f"worker-{time.monotonic_ns()}.err", "w") as err:  # the child keeps its own copy
        p = subprocess.Popen(
            args, cwd=ROOT, env=env(tmp, **extra), stdout=subprocess.PIPE, stderr=err, text=True
        )
    assert p.stdout is not None
    assert "little worker" in p.stdout.readline()  # it serves
    return p


def bodies(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "bodies.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(cond: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


def kill(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait()
    if p.stdout is not None:
        p.stdout.close()


def stop(p: subprocess.Popen[str]) -> int:
    p.send_signal(signal.SIGTERM)
    code = p.wait(timeout=60)
    if p.stdout is not None:
        p.stdout.close()
    return code


def statuses(world: durable.World, ids: list[str]) -> list[str]:
    return [durable.runtime.run_status(world, r).status for r in ids]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    points = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1])
    )
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best


def hold_intervals(tmp: Path) -> dict[str, list[tuple[float, float]]]:
    starts: dict[str, float] = {}
    out: dict[str, list[tuple[float, float]]] = {}
    for b in bodies(tmp):
        if b["body"] != "hold":
            continue
        if b["phase"] == "start":
            starts[b["key"]] = b["t"]
        else:
            out.setdefault(b["key"].split("-")[0], []).append((starts[b["key"]], b["t"]))
    return out


def test_a_background_run_of_a_killed_process_is_finished_by_a_later_worker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    p = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.procs.runtime_app", str(data), "background", "bg"],
        cwd=ROOT,
        env=env(tmp_path, DURABLE_TEST_PAUSE="2"),
        stdout=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: [b for b in bodies(tmp_path) if b["body"] == "first"])
    world = durable.local_world(data)
    wait_for(lambda: any(t == "timer.set" for _, t, _ in world.log.read("bg")))
    kill(p)
    assert statuses(world, ["bg"]) == ["running"]
    w = worker(tmp_path, DURABLE_TEST_PAUSE="30")
    try:
        wait_for(lambda: statuses(world, ["bg"]) == ["completed"])
    finally:
        assert stop(w) == 0
    assert [b["body"] for b in bodies(tmp_path)] == [
        "first",
        "second",
    ]  # the committed step did not run again
    world.close()


def test_two_worker_processes_keep_the_queue_concurrency(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    ids = [
        durable.start_workflow(app.held, f"k{i}-{i}", world=world, queue=app.work).run_id for i in range(8)
    ]
    ws = [worker(tmp_path, "work"), worker(tmp_path, "work")]
    try:
        wait_for(lambda: statuses(world, ids) == ["completed"] * 8)
    finally:
        for w in ws:
            stop(w)
    intervals = [iv for ivs in hold_intervals(tmp_path).values() for iv in ivs]
    assert len(intervals) == 8
    assert max_overlap(intervals) == 2  # never more than concurrency=2, and the limit was reached
    world.close()


def test_partition_concurrency_never_overlaps_one_key(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    ids = [
        durable.start_workflow(app.held, f"{k}-{i}", world=world, queue=app.parts, partition_key=k).run_id
        for i in range(3)
        for k in ("acme", "globex")
    ]
    ws = [worker(tmp_path, "parts"), worker(tmp_path, "parts")]
    try:
        wait_for(lambda: statuses(world, ids) == ["completed"] * 6)
    finally:
        for w in ws:
            stop(w)
    per_key = hold_intervals(tmp_path)
    assert sorted(per_key) == ["acme", "globex"]
    assert all(max_overlap(ivs) == 1 for ivs in per_key.values())
    assert max_overlap([iv for ivs in per_key.values() for iv in ivs]) == 2  # keys did run side by side
    world.close()


def test_rate_limit_holds_over_every_window(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    ids = [
        durable.start_workflow(app.held, f"r-{i}", world=world, queue=app.limited).run_id for i in range(7)
    ]
    ws = [
        worker(tmp_path, "limited", DURABLE_TEST_HOLD="0"),
        worker(tmp_path, "limited", DURABLE_TEST_HOLD="0"),
    ]
    try:
        wait_for(lambda: statuses(world, ids) == ["completed"] * 7)
    finally:
        for w in ws:
            stop(w)
    recs = durable.runtime._driver.control_of(world).records(ids)
    claims = sorted(r.claimed_at for r in recs.values() if r.claimed_at is not None)
    assert len(claims) == 7
    for i, t in enumerate(claims):  # any window of 1 s holds at most 3 starts
        assert sum(1 for c in claims[i:] if c < t + 1.0) <= 3
    assert claims[-1] - claims[0] >= 2.0  # 7 starts at 3 per second need at least two more windows
    world.close()


def test_dedup_id_across_processes(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    a = durable.start_workflow(app.held, "d-1", world=world, queue=app.plain, dedup_id="job")
    other = durable.local_world(tmp_path / "data")
    assert (
        durable.start_workflow(app.held, "d-2", world=other, queue=app.plain, dedup_id="job").run_id
        == a.run_id
    )
    w = worker(tmp_path, "plain")
    try:
        wait_for(lambda: statuses(world, [a.run_id]) == ["completed"])
    finally:
        stop(w)
    assert [b["key"] for b in bodies(tmp_path) if b["phase"] == "start"] == ["d-1"]
    world.close()
    other.close()


def test_cancel_from_another_process_stops_a_running_run_within_a_second(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    h = durable.start_workflow(app.forever, 1, world=world, queue=app.plain)
    w = worker(tmp_path, "plain")
    try:
        wait_for(lambda: len(world.log.read(h.run_id)) > 3)
        out = subprocess.run(
            [sys.executable, "-m", "durable.cli", "cancel", h.run_id, "--data-dir", str(tmp_path / "data")],
            cwd=ROOT,
            env=env(tmp_path),
            capture_output=True,
            text=True,
            check=True,
        )
        recorded = time.monotonic()  # the request is durable once the command has returned
        assert "requested" in out.stdout
        wait_for(lambda: statuses(world, [h.run_id]) == ["cancelled"], timeout=5)
        assert time.monotonic() - recorded < 1.0
    finally:
        stop(w)
    assert world.events(h.run_id)[-1].type == "run.cancelled"
    world.close()


def test_a_deadline_survives_its_workers_death(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    h = durable.start_workflow(app.forever, 1, world=world, queue=app.plain, deadline=1.5)
    w = worker(tmp_path, "plain")
    wait_for(lambda: len(world.log.read(h.run_id)) > 2)
    at = world.events(h.run_id)[0].deadline_at  # type: ignore[union-attr]
    kill(w)
    w2 = worker(tmp_path, "plain")
    try:
        wait_for(lambda: statuses(world, [h.run_id]) == ["cancelled"], timeout=30)
    finally:
        stop(w2)
    assert world.events(h.run_id)[0].deadline_at == at  # type: ignore[union-attr]
    assert (durable.runtime.run_status(world, h.run_id)).reason == "deadline"
    world.close()


def test_a_killed_worker_s_runs_are_finished_by_another_worker(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    ids = [durable.start_workflow(app.two_steps, i, world=world, queue=app.plain).run_id for i in range(4)]
    # Each run's timer keeps the deadline it recorded: the next worker waits out its rest.
    w = worker(tmp_path, "plain", DURABLE_TEST_PAUSE="5")
    wait_for(lambda: len([b for b in bodies(tmp_path) if b["body"] == "first"]) == 4)
    wait_for(lambda: all(any(t == "timer.set" for _, t, _ in world.log.read(r)) for r in ids))
    kill(w)
    rows = json.loads(
        subprocess.run(
            [sys.executable, "-m", "durable.cli", "runs", "--json", "--data-dir", str(tmp_path / "data")],
            cwd=ROOT,
            env=env(tmp_path),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert {r["run_id"]: r["orphaned"] for r in rows} == dict.fromkeys(ids, True)
    assert {r["driver_pid"] for r in rows} == {w.pid}
    w2 = worker(tmp_path, DURABLE_TEST_PAUSE="0")  # recovery needs no queue
    try:
        wait_for(lambda: statuses(world, ids) == ["completed"] * 4)
    finally:
        stop(w2)
    firsts = [b for b in bodies(tmp_path) if b["body"] == "first"]
    assert len(firsts) == 4 and {b["pid"] for b in firsts} == {w.pid}
    assert {b["pid"] for b in bodies(tmp_path) if b["body"] == "second"} == {w2.pid}
    # Each worker's stderr (little worker logs INFO): a first drive goes unsaid beside its claim,
    # the drive that takes a killed worker's run over is said.
    first_err, second_err = (f.read_text() for f in sorted(tmp_path.glob("worker-*.err")))
    assert all(f"claimed run {r} " in first_err for r in ids) and "drives run" not in first_err
    assert all(f"drives run {r} (drive 2)" in second_err for r in ids)
    world.close()


def test_sigterm_stops_gracefully_and_leaves_runs_resumable(tmp_path: Path) -> None:
    world = durable.local_world(tmp_path / "data")
    ids = [durable.start_workflow(app.two_steps, i, world=world, queue=app.plain).run_id for i in range(3)]
    w = worker(tmp_path, "plain", DURABLE_TEST_PAUSE="5")
    wait_for(lambda: all(any(t == "timer.set" for _, t, _ in world.log.read(r)) for r in ids))
    assert stop(w) == 0
    # It did not wait out the 5 s sleeps: they are still running (a worker that waited would have ended them).
    assert statuses(world, ids) == ["running"] * 3
    assert all(durable.runtime._handle.driver_of(world, r)["driver"] == "orphaned" for r in ids)
    w2 = worker(tmp_path, DURABLE_TEST_PAUSE="0")
    try:
        wait_for(lambda: statuses(world, ids) == ["completed"] * 3)
    finally:
        stop(w2)
    assert len([b for b in bodies(tmp_path) if b["body"] == "first"]) == 3
    world.close()
