"""An encrypted world's schedules: each schedule's stored input is ciphertext in runtime.db."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import CodecError, EncryptionCodec, Schedule
from durable.runtime import tick_id
from tests.helpers.waiting import until

pytest.importorskip("cryptography")

KEY = bytes(range(32))
MARK = b"ZEBRA-SCHEDULE-INPUT"
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC).timestamp()


@durable.workflow
async def beat(label: str) -> str:
    return f"ran {label[:6]}"


def _tick(data: Path, codec: Any) -> str:
    """A Worker stores a schedule with a marked input, starts its tick and drives the run to the end."""

    async def main() -> str:
        now = [T0 + 1]
        with durable.local_world(data, codec=codec, clock=lambda: now[0]) as world:
            schedule = Schedule("beat", beat, every=60, input=MARK.decode())
            async with durable.Worker(world, workflows=[], schedules=[schedule]):
                # A first pass at T0 + 1 starts the ticks from then; then time passes T0 + 60.
                await until(
                    lambda: world.schedules.list()[0].handled_until is not None, what="the first pass"
                )
                now[0] = T0 + 61
                rid = tick_id("beat", T0 + 60)
                await until(
                    lambda: getattr(world.log.info(rid), "status", None) == "completed", what="the run"
                )
            (listed,) = world.schedules.list()
            assert listed.name == "beat"
            out: str = await durable.handle(rid, world=world).result()
            return out

    return asyncio.run(main())


def _leaks(root: Path) -> list[str]:
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    return [str(p.relative_to(root)) for p in files if MARK in p.read_bytes()]


def test_without_a_codec_the_schedule_input_is_in_runtime_db(tmp_path: Path) -> None:
    """The control case: the scan below finds a plain world's schedule input."""
    assert _tick(tmp_path, None) == "ran ZEBRA-"
    assert any(name.startswith("runtime.db") for name in _leaks(tmp_path))


def test_an_encrypted_world_s_schedule_input_is_ciphertext(tmp_path: Path) -> None:
    assert _tick(tmp_path, EncryptionCodec(KEY)) == "ran ZEBRA-"
    assert _leaks(tmp_path) == []
    db = sqlite3.connect(tmp_path / "runtime.db")
    try:
        name, workflow, stored = db.execute("SELECT name, workflow, input FROM schedules").fetchone()
    finally:
        db.close()
    assert name == "beat" and workflow.endswith("beat")  # the definition stays readable
    assert stored.startswith("enc1:")


def test_a_schedule_input_moved_to_another_schedule_is_refused(tmp_path: Path) -> None:
    _tick(tmp_path, EncryptionCodec(KEY))
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        world.schedules.create(Schedule("other", beat, every=60, input="plain enough"))
    db = sqlite3.connect(tmp_path / "runtime.db")
    (stored,) = db.execute("SELECT input FROM schedules WHERE name = 'beat'").fetchone()
    db.execute("UPDATE schedules SET input = ? WHERE name = 'other'", (stored,))
    db.commit()
    db.close()
    with (
        durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world,
        pytest.raises(CodecError, match="schedule 'other'"),
    ):
        world.schedules.list()


def test_rekey_rewrites_schedule_and_queued_inputs(tmp_path: Path) -> None:
    """After a rekey to another key, and then to the clear, runtime.db's inputs read under the new one."""
    from durable.ops._rekey import rekey

    other = EncryptionCodec(bytes(range(1, 33)))
    _tick(tmp_path, EncryptionCodec(KEY))
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        durable.start_workflow(beat, MARK.decode() + " queued", world=world, run_id="waiting", queue="q")
    assert _leaks(tmp_path) == []
    done = rekey(tmp_path, other, EncryptionCodec(KEY))
    assert done["runtime_inputs"] == 3  # the tick's run, the queued run, the schedule
    assert _leaks(tmp_path) == []

    async def drive(codec: Any) -> str:
        with durable.local_world(tmp_path, codec=codec) as world:
            (listed,) = world.schedules.list()
            assert listed.name == "beat"
            assert world.schedules.store.get("beat").input == f'"{MARK.decode()}"'  # type: ignore[union-attr]
            async with durable.Worker(world, workflows=[beat], queues=["q"]):
                out: str = await durable.handle("waiting", world=world).result(timeout=60)
            return out

    assert asyncio.run(drive(other)) == "ran ZEBRA-"  # the old key is not needed any more
    rekey(tmp_path, None, other)
    assert _leaks(tmp_path)  # in the clear again
    with durable.local_world(tmp_path) as world:
        assert world.schedules.store.get("beat").input == f'"{MARK.decode()}"'  # type: ignore[union-attr]
