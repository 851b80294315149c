"""DBOS's runtime on SQLite: ``DBOS.start_workflow`` in process, and a queue served by DBOS processes.

The system database is one SQLite file in the measured directory, set to WAL
before DBOS opens it (as ``dbos_sys`` does for the ``DBOS (WAL)`` rows). The
queued runs are enqueued from a ``DBOSClient`` in the measuring process and
dequeued by DBOS processes started with ``python -m benchmarks.systems.dbos_rt
serve DIR POLL EXECUTOR``; ``poll`` is the queue's ``polling_interval_sec``
(DBOS's default is 1 s). Handles wait with ``polling_interval_sec=0.001``, so
waiting for a result adds no more than a millisecond.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSClient

from benchmarks.systems.dbos_sys import _launch
from benchmarks.systems.durable_rt import _summary

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "bench"
WAIT = 0.001  # the handles' result polling interval
WARM = 3


@DBOS.step()
def rt_trivial(i: int) -> int:
    return i


@DBOS.workflow()
def rt_one_step(i: int) -> int:
    return rt_trivial(i)


def _url(dir: str) -> str:
    return f"sqlite:///{os.path.join(dir, 'dbos.sqlite')}"


def serve_main(dir: str, poll: float, executor: str) -> None:
    """A DBOS process serving the queue until SIGTERM."""
    _launch(dir, "wal", executor=executor)
    DBOS.register_queue(QUEUE, polling_interval_sec=poll, on_conflict="always_update")
    print("serving", flush=True)
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    while not stop:
        time.sleep(0.05)
    DBOS.destroy()


def _serve(dir: str, poll: float, executor: str) -> subprocess.Popen[str]:
    with open(os.path.join(dir, f"{executor}.err"), "w") as err:  # the child keeps its own copy
        p = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.systems.dbos_rt", "serve", dir, str(poll), executor],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert p.stdout is not None
    if "serving" not in p.stdout.readline():
        p.kill()
        raise RuntimeError("the DBOS process did not start")
    return p


def _stop(p: subprocess.Popen[str]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if p.stdout is not None:
        p.stdout.close()


def _prepare(dir: str, poll: float) -> None:
    """Create the system database (WAL, migrated) and the queue before any process uses them."""
    _launch(dir, "wal", executor="bench-setup")
    DBOS.register_queue(QUEUE, polling_interval_sec=poll, on_conflict="always_update")
    DBOS.destroy()


def latency(dir: str, n: int, queued: bool, poll: float = 1.0) -> dict[str, Any]:
    """Start-to-result of ``n`` runs one after another, in process or through a DBOS queue."""
    if not queued:
        _launch(dir, "wal")
        try:
            lat = []
            for i in range(-WARM, n):
                t0 = time.perf_counter()
                h = DBOS.start_workflow(rt_one_step, i)
                assert h.get_result(polling_interval_sec=WAIT) == i
                if i >= 0:
                    lat.append(time.perf_counter() - t0)
        finally:
            DBOS.destroy()
        return _summary(lat)
    _prepare(dir, poll)
    server = _serve(dir, poll, "bench-server")
    client = DBOSClient(system_database_url=_url(dir))
    try:
        lat = []
        for i in range(-WARM, n):
            t0 = time.perf_counter()
            h = client.enqueue({"queue_name": QUEUE, "workflow_name": "rt_one_step"}, i)
            assert h.get_result(polling_interval_sec=WAIT) == i
            if i >= 0:
                lat.append(time.perf_counter() - t0)
    finally:
        client.destroy()
        _stop(server)
    return _summary(lat)


def throughput(dir: str, n: int, workers: int, poll: float = 1.0) -> dict[str, Any]:
    """``n`` runs enqueued from a client, served by ``workers`` DBOS processes.

    Timed from the first enqueue to the last result.
    """
    _prepare(dir, poll)
    servers = [_serve(dir, poll, f"bench-server-{k}") for k in range(workers)]
    client = DBOSClient(system_database_url=_url(dir))
    try:
        for i in range(-WARM, 0):
            client.enqueue({"queue_name": QUEUE, "workflow_name": "rt_one_step"}, i).get_result(
                polling_interval_sec=WAIT
            )
        t0 = time.perf_counter()
        handles = [client.enqueue({"queue_name": QUEUE, "workflow_name": "rt_one_step"}, i) for i in range(n)]
        for i, h in enumerate(handles):
            assert h.get_result(polling_interval_sec=WAIT) == i
        seconds = time.perf_counter() - t0
    finally:
        client.destroy()
        for p in servers:
            _stop(p)
    return {"seconds": seconds, "per_s": n / seconds, "per_us": seconds / n * 1e6}


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve_main(sys.argv[2], float(sys.argv[3]), sys.argv[4])
