"""A crafted log cannot make durable allocate without bound or recurse without bound."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
import zlib
from pathlib import Path

import pytest

import durable
from durable.engine import _snapshots
from durable.engine._snapshots import STATE_ENCODING, decode_state, encode_state, inflate
from durable.errors import LogCorruptedError


def _bomb(size: int) -> bytes:
    c = zlib.compressobj(9)
    chunk = b"\x00" * (1 << 20)
    out = [c.compress(chunk) for _ in range(size >> 20)]
    return b"".join(out) + c.flush()


def test_a_snapshot_bomb_is_refused_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64 MiB bomb (about 64 KB compressed) against a 1 MiB bound: refused, typed."""
    monkeypatch.setattr(_snapshots, "MIN_INFLATE_BOUND", 1 << 20)
    packed = _bomb(64 << 20)
    assert len(packed) < 100_000
    stored = {"encoding": STATE_ENCODING, "data": base64.b64encode(packed).decode()}
    with pytest.raises(LogCorruptedError, match="inflates past"):
        decode_state(stored, "r")


def test_the_bound_is_a_ratio_of_the_compressed_size() -> None:
    """Inflation stops at max(MIN_INFLATE_BOUND, INFLATE_RATIO x compressed): the default refuses a bomb."""
    packed = _bomb(128 << 20)  # about 130 KB that would inflate to 128 MiB, past the 64 MiB floor
    with pytest.raises(LogCorruptedError, match=f"past {_snapshots.MIN_INFLATE_BOUND} bytes"):
        inflate(packed, "r")


def test_real_snapshots_and_truncated_ones() -> None:
    state = {"steps_started": {}, "steps_completed": {}, "attempts": {}, "x": "y" * 10_000}
    assert decode_state(encode_state(state))["x"] == "y" * 10_000
    packed = zlib.compress(b'{"a": 1}')
    with pytest.raises(zlib.error):
        inflate(packed[:-3])


def test_a_deeply_nested_row_is_a_typed_error_not_a_crash(tmp_path: Path) -> None:
    @durable.step
    async def s() -> int:
        return 1

    @durable.workflow
    async def w() -> int:
        return await s()

    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(w, world=world, run_id="r"))
    db = sqlite3.connect(tmp_path / "events.db")
    deep = '{"output": ' + "[" * 200_000 + "]" * 200_000 + "}"
    db.execute("UPDATE events SET data = ? WHERE run_id = 'r' AND type = 'step.completed'", (deep,))
    db.commit()
    db.close()
    with durable.local_world(tmp_path) as world:
        with pytest.raises(LogCorruptedError, match="damaged"):
            world.events("r")
        with pytest.raises(LogCorruptedError, match="damaged"):
            asyncio.run(durable.run_workflow(w, world=world, run_id="r"))
