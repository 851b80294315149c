"""Messages, events and streams across real processes: SIGKILLed drivers and senders, remote readers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from tests.helpers.procs import messages_app as app
from tests.runtime.test_runtime_procs import ROOT, bodies, env, kill, stop, wait_for

pytestmark = pytest.mark.slow

APP = "tests.helpers.procs.messages_app"
TARGET = f"{APP}:WORKFLOWS"


def worker(tmp: Path, *queues: str, **extra: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "durable.cli", "worker", TARGET, "--data-dir", str(tmp / "data")]
    for q in queues:
        args += ["--queue", q]
    with open(tmp / "worker.err", "a") as err:
        p = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env(tmp, **{f"DURABLE_TEST_{k}": v for k, v in extra.items()}),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert p.stdout is not None
    assert "little worker" in p.stdout.readline()
    return p


def handled(tmp: Path) -> list[Any]:
    return [b["m"] for b in bodies(tmp) if b["body"] == "handle"]


def committed(world: durable.World, run_id: str) -> int:
    rows = world.log.read(run_id)
    return sum(1 for _, t, _ in rows if t == "step.completed")


def status(world: durable.World, run_id: str) -> str:
    return durable.runtime.run_status(world, run_id).status


def test_messages_before_and_during_a_run_are_handled_once_in_order_across_a_sigkill(tmp_path: Path) -> None:
    """Two messages wait before the run starts, two arrive while it runs, two while no driver lives."""
    world = durable.local_world(tmp_path / "data")
    h = durable.start_workflow(app.inbox, 6, world=world, run_id="chat", queue="chat")
    asyncio.run(h.send("m0"))
    asyncio.run(h.send("m1"))
    w1 = worker(tmp_path, "chat")
    try:
        wait_for(lambda: committed(world, "chat") == 2)
        asyncio.run(h.send("m2"))
        asyncio.run(h.send({"m": 3}))
        wait_for(lambda: committed(world, "chat") == 4)
    finally:
        kill(w1)  # the driver dies while the run waits in recv
    asyncio.run(h.send("m4"))
    asyncio.run(h.send("m5"))
    w2 = worker(tmp_path, "chat")
    try:
        wait_for(lambda: status(world, "chat") == "completed")
    finally:
        assert stop(w2) == 0
    want = ["m0", "m1", "m2", {"m": 3}, "m4", "m5"]
    assert asyncio.run(h.result()) == want
    assert handled(tmp_path) == want
    assert [e.value for e in world.events("chat") if e.type == "message.received"] == want  # type: ignore[union-attr]
    assert len({b["pid"] for b in bodies(tmp_path)}) == 2  # both workers handled some
    assert world.open_messages().messages("chat", pending=True) == []


def test_a_sender_killed_after_sending_is_resumed_by_a_worker_and_sends_once(tmp_path: Path) -> None:
    """The sender dies after the message is stored, before its log says so; its resume sends nothing new."""
    world = durable.local_world(tmp_path / "data")
    durable.start_workflow(app.inbox, 1, world=world, run_id="target", queue="nobody-serves-this")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.helpers.procs.messages_app",
            str(tmp_path / "data"),
            "send-and-die",
            "s",
            "target",
        ],
        cwd=ROOT,
        env=env(tmp_path),
        timeout=60,
    )
    assert p.returncode == -9
    store = world.open_messages()
    assert [m.data for m in store.messages("target")] == ['"hello"']
    assert [e.type for e in world.events("s")] == ["run.started"]
    w = worker(tmp_path)  # recovers the orphaned sender run
    try:
        wait_for(lambda: status(world, "s") == "completed")
    finally:
        assert stop(w) == 0
    assert [m.message_id for m in store.messages("target")] == ["s:send#0"]
    assert [e.type for e in world.events("s")].count("message.sent") == 1


def test_events_and_streams_read_live_from_another_process_with_a_reconnect(
    tmp_path: Path,
) -> None:
    """This process reads a run driven by a worker process: live values, events, and start= on reconnect."""
    world = durable.local_world(tmp_path / "data")
    h = durable.start_workflow(app.ticker, 6, world=world, run_id="tick", queue="chat")
    w = worker(tmp_path, "chat")

    async def read() -> tuple[list[Any], list[Any], Any]:
        first: list[Any] = []
        await h.send("go")
        async for v in h.read_stream("s"):
            first.append(v)  # arrived while the run waits for the next message: it is live
            if len(first) == 3:
                break  # the reader disconnects
            await h.send("go")
        event = None
        for _ in range(10_000):
            event = await h.get_event("progress", timeout=5)
            if event == 2:
                break
            await asyncio.sleep(0.002)
        rest: list[Any] = []
        await h.send("go")
        async for v in h.read_stream("s", start=len(first)):
            rest.append(v)
            if len(first) + len(rest) < 6:
                await h.send("go")
        return first, rest, event

    try:
        first, rest, event = asyncio.run(read())
        wait_for(lambda: status(world, "tick") == "completed")
    finally:
        assert stop(w) == 0
    assert (first, rest, event) == ([0, 1, 2], [3, 4, 5], 2)
    assert asyncio.run(h.get_event("progress")) == 5


def deliveries(tmp: Path) -> list[dict[str, Any]]:
    return [b for b in bodies(tmp) if b["body"] == "deliver"]


def test_an_outbox_entry_whose_dispatcher_is_sigkilled_mid_call_is_re_driven(tmp_path: Path) -> None:
    """The first worker dies inside the tool body; the next one calls it again with the same key."""
    world = durable.local_world(tmp_path / "data")
    key = asyncio.run(durable.run_workflow(app.place, "o-1", world=world, run_id="order"))
    w1 = worker(tmp_path, HOLD="3600")
    try:
        wait_for(lambda: len(deliveries(tmp_path)) == 1)
    finally:
        kill(w1)  # in the middle of the call
    w2 = worker(tmp_path)
    try:
        store = world.open_outbox()
        wait_for(lambda: (e := store.get(key)) is not None and e.state == "delivered")
    finally:
        assert stop(w2) == 0
    calls = deliveries(tmp_path)
    assert [(c["key"], c["phase"]) for c in calls] == [(key, "start"), (key, "start"), (key, "end")]
    assert calls[0]["pid"] != calls[1]["pid"]
    entry = store.get(key)
    assert entry is not None and entry.attempts == 2 and entry.result == '"delivered o-1"'


def test_a_poison_outbox_entry_lands_in_the_dead_letter_after_its_retries(tmp_path: Path) -> None:
    """A body that always fails is tried max_attempts times by a worker process, then dead-lettered."""
    world = durable.local_world(tmp_path / "data")
    key = asyncio.run(durable.run_workflow(app.place, "poison", world=world, run_id="bad"))
    w = worker(tmp_path)
    try:
        store = world.open_outbox()
        wait_for(lambda: (e := store.get(key)) is not None and e.state == "dead")
    finally:
        assert stop(w) == 0
    assert [c["key"] for c in deliveries(tmp_path)] == [key, key, key]
    entry = store.get(key)
    assert entry is not None and entry.attempts == 3
    assert entry.error is not None and "ValueError: this order cannot be delivered" in entry.error


def test_two_workers_with_the_same_schedule_start_each_tick_once(tmp_path: Path) -> None:
    """Both workers see every tick of a one-second schedule; each tick's run exists and ran once."""
    args = [
        sys.executable,
        "-m",
        "durable.cli",
        "worker",
        f"{APP}:SCHEDULED",
        "--data-dir",
        str(tmp_path / "data"),
    ]
    procs = []
    for _ in range(2):
        with open(tmp_path / "worker.err", "a") as err:
            p = subprocess.Popen(
                args, cwd=ROOT, env=env(tmp_path), stdout=subprocess.PIPE, stderr=err, text=True
            )
        assert p.stdout is not None and "little worker" in p.stdout.readline()
        procs.append(p)
    try:
        wait_for(lambda: len({b["key"] for b in bodies(tmp_path) if b["body"] == "beat"}) >= 4)
    finally:
        for p in procs:
            assert stop(p) == 0
    world = durable.local_world(tmp_path / "data")
    beats = [b for b in bodies(tmp_path) if b["body"] == "beat"]
    run_ids = [b["key"].split(":tool:")[0] for b in beats]
    assert len(run_ids) == len(set(run_ids))  # no tick ran twice
    assert all(r.startswith("schedule:beat:") and r.endswith("Z") for r in run_ids)
    ticks = sorted(r for r in (i.run_id for i in world.runs()) if r.startswith("schedule:beat:"))
    assert ticks == sorted(set(ticks)) and set(run_ids) <= set(ticks)
    done = [durable.runtime.run_status(world, t).status for t in ticks]
    assert done.count("completed") >= 4
