"""Messages, the outbox and schedules on a Postgres world across real `little worker` processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from tests.helpers import pg
from tests.helpers.procs import messages_app as app
from tests.messages.test_messages_procs import APP, TARGET, committed, deliveries, handled, status
from tests.runtime.test_runtime_procs import ROOT, bodies, env, kill, stop, wait_for

pytestmark = pytest.mark.slow

TAKEOVER = 60.0
"""Seconds a test waits for a worker to take over a SIGKILLed one's run (lease 10 s, plus a heartbeat)."""


class Place:
    """One schema on the test server: its world in this process, and worker processes on it."""

    def __init__(self, tmp: Path, dsn: str):
        self.tmp = tmp
        self.dsn = dsn
        self.schema = pg.new_schema()
        self.world = durable.postgres_world(dsn, schema=self.schema)

    def worker(self, target: str = TARGET, *queues: str, **extra: str) -> subprocess.Popen[str]:
        args = [
            sys.executable,
            "-m",
            "durable.cli",
            "worker",
            target,
            "--dsn",
            self.dsn,
            "--schema",
            self.schema,
        ]
        for q in queues:
            args += ["--queue", q]
        with open(self.tmp / "worker.err", "a") as err:
            p = subprocess.Popen(
                args,
                cwd=ROOT,
                env=env(self.tmp, **{f"DURABLE_TEST_{k}": v for k, v in extra.items()}),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert p.stdout is not None
        assert "little worker" in p.stdout.readline()
        return p


@pytest.fixture
def place(tmp_path: Path, pg_server: pg.Server) -> Iterator[Place]:
    p = Place(tmp_path, pg_server.dsn)
    yield p
    p.world.close()
    pg.drop_schema(pg_server.dsn, p.schema)


def test_messages_are_handled_once_in_order_across_a_sigkilled_worker(place: Place) -> None:
    """Messages before the run, during it and while no driver lives: each handled once, in order."""
    world = place.world
    h = durable.start_workflow(app.inbox, 6, world=world, run_id="chat", queue="chat")
    asyncio.run(h.send("m0"))
    asyncio.run(h.send("m1"))
    w1 = place.worker(TARGET, "chat")
    try:
        wait_for(lambda: committed(world, "chat") == 2)
        asyncio.run(h.send("m2"))
        asyncio.run(h.send({"m": 3}))
        wait_for(lambda: committed(world, "chat") == 4)
    finally:
        kill(w1)  # the driver dies while the run waits in recv
    asyncio.run(h.send("m4"))
    asyncio.run(h.send("m5"))
    w2 = place.worker(TARGET, "chat")
    try:
        wait_for(lambda: status(world, "chat") == "completed", timeout=TAKEOVER)
    finally:
        assert stop(w2) == 0
    want = ["m0", "m1", "m2", {"m": 3}, "m4", "m5"]
    assert asyncio.run(h.result()) == want
    assert handled(place.tmp) == want
    got: list[Any] = [e.value for e in world.events("chat") if e.type == "message.received"]  # type: ignore[union-attr]
    assert got == want
    assert len({b["pid"] for b in bodies(place.tmp)}) == 2  # both workers handled some


def test_an_outbox_entry_whose_dispatcher_is_sigkilled_mid_call_is_re_driven(place: Place) -> None:
    """The first worker dies inside the tool body; once its lease runs out the next one calls it again."""
    world = place.world
    key = asyncio.run(durable.run_workflow(app.place, "o-1", world=world, run_id="order"))
    w1 = place.worker(HOLD="3600")
    try:
        wait_for(lambda: len(deliveries(place.tmp)) == 1)
    finally:
        kill(w1)  # in the middle of the call
    w2 = place.worker()
    try:
        store = world.open_outbox()
        wait_for(lambda: (e := store.get(key)) is not None and e.state == "delivered", timeout=TAKEOVER)
    finally:
        assert stop(w2) == 0
    calls = deliveries(place.tmp)
    assert [(c["key"], c["phase"]) for c in calls] == [(key, "start"), (key, "start"), (key, "end")]
    assert calls[0]["pid"] != calls[1]["pid"]
    entry = store.get(key)
    assert entry is not None and entry.attempts == 2 and entry.result == '"delivered o-1"'


def test_two_workers_with_the_same_schedule_start_each_tick_once(place: Place) -> None:
    """Both workers serve a one-second schedule from the schema; each tick's run exists and ran once."""
    procs = [place.worker(f"{APP}:SCHEDULED") for _ in range(2)]
    try:
        wait_for(lambda: len({b["key"] for b in bodies(place.tmp) if b["body"] == "beat"}) >= 4)
    finally:
        for p in procs:
            assert stop(p) == 0
    world = place.world
    beats = [b for b in bodies(place.tmp) if b["body"] == "beat"]
    run_ids = [b["key"].split(":tool:")[0] for b in beats]
    assert len(run_ids) == len(set(run_ids))  # no tick ran twice
    assert all(r.startswith("schedule:beat:") and r.endswith("Z") for r in run_ids)
    ticks = sorted(r for r in (i.run_id for i in world.runs()) if r.startswith("schedule:beat:"))
    assert set(run_ids) <= set(ticks)
    assert [durable.runtime.run_status(world, t).status for t in ticks].count("completed") >= 4
    schedule = world.schedules.list()
    assert [s.name for s in schedule] == ["beat"]
