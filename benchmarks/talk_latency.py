"""Latency of talking to a run between two processes: send to recv, and stream write to read.

One process runs the workflow (the peer), this process is the outside: it
sends messages that the peer's ``recv`` takes (latency: from just before
``send`` to when ``recv`` returned in the peer), and it reads the stream the
peer writes (latency: from just before ``write_stream`` in the peer to when
``read_stream`` yielded here). Both clocks are the same machine's
``time.time()``. Sends and writes are spaced (``--gap``) so that each one
finds the other side waiting, which is the case a chat or a live page has.

durable runs on ``local_world``; DBOS (``pip install -e ".[bench]"``) on its
SQLite system database, with its default polling interval (1 s) and with the
smallest one it accepts (1 ms), since both poll the database on SQLite.

    python -m benchmarks.talk_latency [--n 200] [--gap 0.01] [--systems durable,dbos]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


# -- the peer: the process that runs the workflow ----------------------------------


def durable_peer(data: str, mode: str, n: int, gap: float) -> None:
    import durable

    @durable.workflow(name="talk_receiver")
    async def receiver(count: int) -> list[float]:
        lat = []
        for _ in range(count):
            m = await durable.recv()
            lat.append(time.time() - m["t"])
        return lat

    @durable.workflow(name="talk_writer")
    async def writer(count: int) -> int:
        for _ in range(count):
            await durable.write_stream("s", {"t": time.time()})
            await asyncio.sleep(gap)
        durable.close_stream("s")
        return count

    world = durable.local_world(data)
    wf = receiver if mode == "recv" else writer
    out = asyncio.run(durable.run_workflow(wf, n, world=world, run_id="talk"))
    Path(data, "peer.json").write_text(json.dumps(out))


def dbos_peer(data: str, mode: str, n: int, gap: float, polling: float | None) -> None:
    from dbos import DBOS, SetWorkflowID

    @DBOS.workflow()
    def receiver(count: int) -> list[float]:
        lat = []
        for _ in range(count):
            m = DBOS.recv(timeout_seconds=120)
            lat.append(time.time() - m["t"])
        return lat

    @DBOS.workflow()
    def writer(count: int) -> int:
        for _ in range(count):
            DBOS.write_stream("s", {"t": time.time()})
            time.sleep(gap)
        DBOS.close_stream("s")
        return count

    config: dict[str, Any] = {
        "name": "talk",
        "system_database_url": f"sqlite:///{data}/dbos.sqlite",
        "log_level": "WARNING",
    }
    if polling is not None:
        config["notification_listener_polling_interval_sec"] = polling
    DBOS(config=config)  # type: ignore[arg-type]
    DBOS.launch()
    with SetWorkflowID("talk"):
        out = (receiver if mode == "recv" else writer)(n)
    Path(data, "peer.json").write_text(json.dumps(out))
    DBOS.destroy()


# -- the outside: this process ------------------------------------------------------


def _spawn(system: str, data: str, mode: str, n: int, gap: float) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "benchmarks.talk_latency", "--peer", system, data, mode, str(n), str(gap)]
    return subprocess.Popen(args, cwd=ROOT)


def _wait_file(path: Path, proc: subprocess.Popen[bytes]) -> None:
    proc.wait(timeout=600)
    if proc.returncode != 0 or not path.exists():
        raise SystemExit(f"the peer failed ({proc.returncode})")


async def durable_outside(data: str, mode: str, n: int, gap: float) -> list[float]:
    import durable

    world = durable.local_world(data)
    for _ in range(60_000):  # the peer's run exists
        if world.log.info("talk") is not None:
            break
        await asyncio.sleep(0.01)
    h = durable.handle("talk", world=world)
    if mode == "recv":
        for _ in range(n):
            await h.send({"t": time.time()})
            await asyncio.sleep(gap)
        return []
    return [time.time() - v["t"] async for v in h.read_stream("s")]


def dbos_outside(data: str, mode: str, n: int, gap: float, polling: float | None) -> list[float]:
    import sqlite3

    from dbos import DBOSClient

    path = f"{data}/dbos.sqlite"
    while True:  # the peer's workflow exists
        try:
            if (
                os.path.exists(path)
                and sqlite3.connect(path)
                .execute("SELECT 1 FROM workflow_status WHERE workflow_uuid = 'talk'")
                .fetchone()
            ):
                break
        except sqlite3.Error:
            pass
        time.sleep(0.01)
    client = DBOSClient(system_database_url=f"sqlite:///{path}")
    try:
        if mode == "recv":
            for _ in range(n):
                client.send("talk", {"t": time.time()})
                time.sleep(gap)
            return []
        kw = {} if polling is None else {"polling_interval_sec": polling}
        return [time.time() - v["t"] for v in client.read_stream("talk", "s", **kw)]
    finally:
        client.destroy()


def measure(system: str, mode: str, n: int, gap: float) -> list[float]:
    with tempfile.TemporaryDirectory() as data:
        peer = _spawn(system, data, mode, n, gap)
        if system == "durable":
            got = asyncio.run(durable_outside(data, mode, n, gap))
        else:
            got = dbos_outside(data, mode, n, gap, _polling(system))
        _wait_file(Path(data, "peer.json"), peer)
        if mode == "recv":
            got = json.loads(Path(data, "peer.json").read_text())
        return got


def _polling(system: str) -> float | None:
    return 0.001 if system == "dbos-1ms" else None


def summary(lat: list[float]) -> str:
    ms = sorted(x * 1000 for x in lat)
    p90 = ms[int(len(ms) * 0.9) - 1] if ms else float("nan")
    return f"median {statistics.median(ms):7.2f} ms   p90 {p90:7.2f} ms   (n={len(ms)})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--n", type=int, default=200, help="messages and stream values per measurement")
    p.add_argument("--gap", type=float, default=0.01, help="seconds between two sends or writes")
    p.add_argument("--systems", default="durable,dbos,dbos-1ms")
    p.add_argument("--peer", nargs=5, metavar=("SYSTEM", "DIR", "MODE", "N", "GAP"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.peer:
        system, data, mode, n, gap = a.peer
        if system == "durable":
            durable_peer(data, mode, int(n), float(gap))
        else:
            dbos_peer(data, mode, int(n), float(gap), _polling(system))
        return 0
    print(f"talk latency between two processes, n={a.n}, gap={a.gap * 1000:g} ms\n")
    for system in a.systems.split(","):
        if system.startswith("dbos"):
            try:
                import dbos  # noqa: F401
            except ImportError:
                print(f"{system:9} skipped: pip install -e '.[bench]'")
                continue
        for mode, label in (("recv", "send -> recv"), ("stream", "write_stream -> read_stream")):
            print(f"{system:9} {label:28} {summary(measure(system, mode, a.n, a.gap))}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
