"""DBOS with a PostgreSQL system database: steps in process, and its queue served by a DBOS process.

Each measurement has a system database of its own on the harness's server
(DBOS creates and migrates it at launch). The queued runs are enqueued from a
``DBOSClient`` in the measuring process and dequeued by a DBOS process
(``python -m benchmarks.systems.dbos_pg serve URL POLL``); ``poll`` is the
queue's ``polling_interval_sec`` (DBOS's default is 1 s). Handles wait with
``get_result(polling_interval_sec=0.001)``.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from typing import Any

from dbos import DBOS, DBOSClient, SetWorkflowID

from benchmarks.pg_server import server_cpu
from benchmarks.systems.dbos_rt import ROOT, WAIT, WARM, _stop
from benchmarks.systems.durable_rt import _summary

QUEUE = "bench"


@DBOS.step()
def pg_trivial(i: int) -> int:
    return i


@DBOS.workflow()
def pg_sequential(n: int) -> int:
    for i in range(n):
        pg_trivial(i)
    return n


@DBOS.workflow()
def pg_one_step(i: int) -> int:
    return pg_trivial(i)


def _url(dsn: str) -> str:
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


def _launch(dsn: str, executor: str = "bench") -> None:
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(
        config={
            "name": "bench",
            "system_database_url": _url(dsn),
            "executor_id": executor,
            "log_level": "WARNING",
        }
    )
    DBOS.launch()


def seq(dsn: str, schema: str, n: int, pg: dict[str, Any]) -> dict[str, Any]:
    _launch(dsn)
    try:
        with SetWorkflowID("warm"):
            pg_sequential(3)
        s0, t0 = server_cpu(pg["pid"]), time.perf_counter()
        with SetWorkflowID("bench_run"):
            pg_sequential(n)
        seconds = time.perf_counter() - t0
        server = server_cpu(pg["pid"]) - s0
    finally:
        DBOS.destroy()
    return {"seconds": seconds, "per_us": seconds / n * 1e6, "server_cpu_us": server / n * 1e6}


def serve_main(dsn: str, poll: float) -> None:
    """A DBOS process serving the queue until SIGTERM."""
    _launch(dsn, executor="bench-server")
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


def _serve(dsn: str, poll: float) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.systems.dbos_pg", "serve", dsn, str(poll)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert p.stdout is not None
    if "serving" not in p.stdout.readline():
        p.kill()
        raise RuntimeError("the DBOS process did not start")
    return p


def latency(dsn: str, schema: str, n: int, pg: dict[str, Any], poll: float = 1.0) -> dict[str, Any]:
    """Enqueue to result of ``n`` one-step runs one after another, a DBOS process serving the queue."""
    _launch(dsn, executor="bench-setup")  # migrate the system database and register the queue first
    DBOS.register_queue(QUEUE, polling_interval_sec=poll, on_conflict="always_update")
    DBOS.destroy()
    server = _serve(dsn, poll)
    client = DBOSClient(system_database_url=_url(dsn))
    try:
        lat = []
        for i in range(-WARM, n):
            t0 = time.perf_counter()
            h = client.enqueue({"queue_name": QUEUE, "workflow_name": "pg_one_step"}, i)
            assert h.get_result(polling_interval_sec=WAIT) == i
            if i >= 0:
                lat.append(time.perf_counter() - t0)
    finally:
        client.destroy()
        _stop(server)
    return _summary(lat)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve_main(sys.argv[2], float(sys.argv[3]))
