"""A Postgres world across real worker processes: SIGKILL takeover, SIGSTOP fencing, a server restart."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from tests.helpers import pg
from tests.helpers.procs import pg_app as app

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LEASE = 1.5


class Cluster:
    """Worker processes on one schema of one server, and the test's own world on it."""

    def __init__(self, tmp: Path, dsn: str, schema: str):
        self.tmp = tmp
        self.dsn = dsn
        self.schema = schema
        self.procs: list[subprocess.Popen[str]] = []
        self.world = durable.postgres_world(dsn, schema=schema, lease=LEASE)

    def worker(self, **extra: str) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DURABLE_TEST_DIR": str(self.tmp),
            "DURABLE_TEST_PG_DSN": self.dsn,
            "DURABLE_TEST_SCHEMA": self.schema,
            "DURABLE_TEST_LEASE": str(LEASE),
            **extra,
        }
        with open(self.tmp / f"worker-{time.monotonic_ns()}.err", "w") as err:
            p = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.procs.pg_app"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert p.stdout is not None
        assert "serving" in p.stdout.readline()
        self.procs.append(p)
        return p

    def bodies(self) -> list[dict[str, Any]]:
        path = self.tmp / "bodies.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def commits(self, run_id: str) -> Counter[str]:
        """How many times each step path was committed in the run's log."""
        return Counter(
            json.loads(data)["path"]
            for _, kind, data in self.world.log.read(run_id)
            if kind == "step.completed"
        )

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with_signal(p, signal.SIGCONT)
                p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
        self.world.close()


def with_signal(p: subprocess.Popen[str], sig: int) -> None:
    if p.poll() is None:
        p.send_signal(sig)


def wait_for(cond: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


@pytest.fixture
def cluster(tmp_path: Path, pg_server: pg.Server) -> Iterator[Cluster]:
    schema = pg.new_schema()
    c = Cluster(tmp_path, pg_server.dsn, schema)
    yield c
    c.close()
    pg.drop_schema(pg_server.dsn, schema)


def test_a_sigkilled_workers_run_is_driven_by_another_within_the_lease(cluster: Cluster) -> None:
    """Worker A dies mid-step; worker B drives the run on within lease + heartbeat (+ one recovery pass)."""
    a = cluster.worker(DURABLE_TEST_HOLD="60")
    h = durable.start_workflow(app.three_steps, 1, world=cluster.world, queue=app.queue)
    wait_for(lambda: any(b["body"] == "slow" and b["pid"] == a.pid for b in cluster.bodies()))
    b = cluster.worker(DURABLE_TEST_HOLD="0")
    a.send_signal(signal.SIGKILL)
    a.wait()
    killed = time.time()
    assert asyncio.run(h.result(timeout=60)) == 23
    taken = next(x["t"] for x in cluster.bodies() if x["body"] == "slow" and x["pid"] == b.pid)
    heartbeat = LEASE / 3
    print(f"takeover after the kill: {taken - killed:.3f} s (lease {LEASE} s, heartbeat {heartbeat:.2f} s)")
    assert taken - killed < LEASE + heartbeat + 1.0  # one recovery pass and a loaded machine's slack
    assert cluster.commits(h.run_id) == {"first": 1, "slow": 1, "last": 1}
    assert [x["body"] for x in cluster.bodies() if x["body"] == "first"] == ["first"]  # replayed, not rerun


def test_a_worker_paused_past_its_lease_is_fenced_and_writes_nothing(cluster: Cluster) -> None:
    """SIGSTOP A mid-step; B takes the run over and finishes it; A, continued, commits nothing."""
    a = cluster.worker(DURABLE_TEST_HOLD="2")
    h = durable.start_workflow(app.three_steps, 2, world=cluster.world, queue=app.queue)
    wait_for(lambda: any(b["body"] == "slow" and b["pid"] == a.pid for b in cluster.bodies()))
    a.send_signal(signal.SIGSTOP)
    b = cluster.worker(DURABLE_TEST_HOLD="0")
    assert asyncio.run(h.result(timeout=60)) == 33
    rows_before = cluster.world.log.read(h.run_id)
    a.send_signal(signal.SIGCONT)
    # A's step body wakes, finishes and tries to commit: the log refuses its stale token.
    wait_for(
        lambda: any(
            x["body"] == "slow" and x["phase"] == "end" and x["pid"] == a.pid for x in cluster.bodies()
        )
    )
    time.sleep(LEASE)  # room for any write A could still attempt (a heartbeat, a recovery pass)
    assert cluster.world.log.read(h.run_id) == rows_before
    assert cluster.commits(h.run_id) == {"first": 1, "slow": 1, "last": 1}
    assert a.poll() is None  # A lives on: fenced, not crashed
    assert b.poll() is None


def test_a_queues_concurrency_holds_across_worker_processes(cluster: Cluster) -> None:
    """Three workers serve a queue with concurrency=2: never more than two of its step bodies overlap."""
    # Each worker drives one run at a time: three could drive three runs, and only the queue's
    # limit keeps them to two; two slots need two workers (a worker that freed a slot would
    # otherwise claim the next run before another one heard of it).
    for _ in range(3):
        cluster.worker(DURABLE_TEST_HOLD="0.3", DURABLE_TEST_CONCURRENCY="1")
    handles = [
        durable.start_workflow(app.three_steps, i, world=cluster.world, queue=app.limited) for i in range(6)
    ]
    for h in handles:
        assert asyncio.run(h.result(timeout=60)) is not None
    starts = {
        (x["x"], x["pid"]): x["t"] for x in cluster.bodies() if x["body"] == "slow" and x["phase"] == "start"
    }
    ends = {
        (x["x"], x["pid"]): x["t"] for x in cluster.bodies() if x["body"] == "slow" and x["phase"] == "end"
    }
    spans = [(starts[k], ends[k]) for k in starts]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda p: (p[0], p[1]))
    cur = most = 0
    for _, d in events:
        cur += d
        most = max(most, cur)
    assert most <= 2
    assert len({pid for _, pid in starts}) >= 2  # the slots were held by different workers


def test_a_server_restart_during_a_run_loses_no_commit(tmp_path: Path) -> None:
    """``pg_ctl restart`` mid-run: the worker reconnects and the run completes, each step committed once."""
    reason = pg.unavailable_reason()
    if reason is not None or not pg.binaries():
        pg.skip_or_fail(reason or "no PostgreSQL server binaries to start a server of this test's own")
    server = pg.Server.start()  # a server of its own: the restart cuts only this test's connections
    schema = pg.new_schema()
    cluster = Cluster(tmp_path, server.dsn, schema)
    try:
        cluster.worker(DURABLE_TEST_HOLD="0.1", DURABLE_TEST_RECONNECT="30")
        h = durable.start_workflow(app.many_steps, 30, world=cluster.world, queue=app.queue)
        wait_for(lambda: sum(1 for x in cluster.bodies() if x["body"] == "numbered") >= 5)
        server.restart()
        assert asyncio.run(h.result(timeout=120)) == sum(range(30))
        counts = cluster.commits(h.run_id)
        assert len(counts) == 30
        assert set(counts.values()) == {1}
    finally:
        cluster.close()
        server.stop()


def test_little_worker_serves_a_postgres_world(cluster: Cluster) -> None:
    """`little worker MODULE:ATTR --dsn DSN --schema S --queue pg` claims and drives the world's runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DURABLE_TEST_DIR": str(cluster.tmp)}
    args = [sys.executable, "-m", "durable.cli", "worker", "tests.helpers.procs.pg_app:WORKFLOWS"]
    args += ["--dsn", cluster.dsn, "--schema", cluster.schema, "--queue", "pg"]
    p = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    cluster.procs.append(p)
    assert p.stdout is not None
    assert "little worker" in p.stdout.readline()
    h = durable.start_workflow(app.three_steps, 4, world=cluster.world, queue=app.queue)
    assert asyncio.run(h.result(timeout=60)) == 53
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 0


def test_a_cancel_from_the_client_stops_a_run_in_a_worker_process(cluster: Cluster) -> None:
    """handle.cancel() in the client is recorded in Postgres; the worker stops the run with run.cancelled."""
    cluster.worker()
    h = durable.start_workflow(app.forever, 1, world=cluster.world, queue=app.queue)
    wait_for(lambda: len(cluster.world.log.read(h.run_id)) > 3)
    asyncio.run(h.cancel())
    with pytest.raises(durable.RunCancelledError):
        asyncio.run(h.result(timeout=30))
    assert cluster.world.events(h.run_id)[-1].type == "run.cancelled"


def test_a_sigkilled_workers_run_shows_its_driver_as_not_live_at_once(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker on this host SIGKILLed with 60 s of lease left: its run shows orphaned at once, not live."""
    from durable.cli import main
    from durable.runtime._handle import driver_of

    a = cluster.worker(DURABLE_TEST_HOLD="60", DURABLE_TEST_LEASE="60")
    h = durable.start_workflow(app.three_steps, 4, world=cluster.world, queue=app.queue)
    wait_for(lambda: any(b["body"] == "slow" and b["pid"] == a.pid for b in cluster.bodies()))
    assert driver_of(cluster.world, h.run_id)["driver"] == "live"
    a.send_signal(signal.SIGKILL)
    a.wait()
    assert driver_of(cluster.world, h.run_id) == {
        "driver": "orphaned",
        "pid": a.pid,
        "host": os.uname().nodename,
    }
    assert main(["runs", "--dsn", cluster.dsn, "--schema", cluster.schema, "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out) if r["run_id"] == h.run_id]
    assert row["orphaned"] is True and row["driver"].startswith("orphaned")
