"""An encrypted world: no plaintext on disk, typed refusals without the key, rotation, moved rows."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import CodecError, EncryptionCodec, KeyMismatchError, RunInterrupted
from durable.engine._context import CURRENT
from durable.ops._verify import verify_run
from durable.store import EncryptedLog, MemoryLog, SqliteLog

pytest.importorskip("cryptography")

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))

MARKS = [
    b"ZEBRA-INPUT",
    b"ZEBRA-STEP-OUT",
    b"ZEBRA-TOOL-OUT",
    b"ZEBRA-ARTIFACT",
    b"ZEBRA-BIG-OUTPUT",
    b"ZEBRA-QUESTION",
    b"ZEBRA-ANSWER",
    b"ZEBRA-FAILURE",
    b"ZEBRA-MEMORY-TEXT",
    b"ZEBRA-MEMORY-META",
]
"""Every value of the run carries one of these; none may appear in any file of the data directory."""


@durable.tool
async def lookup(q: str) -> str:
    return q + " ZEBRA-TOOL-OUT"


@durable.step
async def summarise(x: str) -> str:
    return x + " ZEBRA-STEP-OUT"


@durable.step
async def big(x: str) -> str:
    return "ZEBRA-BIG-OUTPUT " * 200  # above the world's artifact threshold: an artifact


@durable.step(retry=durable.RetryPolicy(max_attempts=1))
async def fails(x: str) -> str:
    raise ValueError("ZEBRA-FAILURE in the message")


async def remember(x: str) -> str:
    """Memory items written, searched with a metadata filter and read back inside the run."""
    run = CURRENT.get()
    assert run is not None
    mem = run.run.world.memory  # type: ignore[attr-defined]
    await mem.put(("notes",), "n1", f"{x} ZEBRA-MEMORY-TEXT green tea", {"tag": "ZEBRA-MEMORY-META", "n": 1})
    await mem.put(("notes",), "n2", "ZEBRA-MEMORY-TEXT black coffee", {"tag": "other", "n": 2})
    hits = await mem.search(("notes",), "green tea", k=2, filter={"tag": "ZEBRA-MEMORY-META"})
    got = await mem.get(("notes",), "n2")
    assert [h.key for h in hits] == ["n1"] and got is not None and got.metadata["n"] == 2
    return str(hits[0].metadata["tag"])


@durable.workflow
async def agent(x: str) -> str:
    a = await summarise(x)
    b = await lookup(a)
    assert await remember(x) == "ZEBRA-MEMORY-META"
    ref = await durable.save_artifact("report.txt", b"ZEBRA-ARTIFACT body")
    await big(x)
    with contextlib.suppress(ValueError):
        await fails(x)
    durable.random()
    answer = durable.interrupt({"question": "ZEBRA-QUESTION?"})
    return f"{b} {ref.read().decode()} {answer}"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _leaks(root: Path) -> list[tuple[str, bytes]]:
    return [(name, m) for name, data in _files(root).items() for m in MARKS if m in data]


def _world(data: Path, codec: Any, **kwargs: Any) -> durable.World:
    """A local world whose memory store has an embedder (the agent writes memory items)."""
    world = durable.local_world(data, codec=codec, **kwargs)
    world.memory.configure(durable.lexical_embedder(dim=64))
    return world


def _run_to_the_end(data: Path, codec: Any) -> str:
    with (
        _world(data, codec, artifact_threshold=256) as world,
        pytest.raises(RunInterrupted),
    ):
        asyncio.run(durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1"))
    with _world(data, codec, artifact_threshold=256) as world:
        out: str = asyncio.run(
            durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1", resume="ZEBRA-ANSWER")
        )
        return out


def test_without_a_codec_the_marks_are_on_disk(tmp_path: Path) -> None:
    """The scan finds the plaintext of a plain world: the encrypted test below means something."""
    _run_to_the_end(tmp_path, None)
    found = {m for _, m in _leaks(tmp_path)}
    assert {b"ZEBRA-INPUT", b"ZEBRA-ARTIFACT", b"ZEBRA-ANSWER", b"ZEBRA-FAILURE"} <= found
    assert {b"ZEBRA-MEMORY-TEXT", b"ZEBRA-MEMORY-META"} <= {m for n, m in _leaks(tmp_path) if "memory" in n}


def test_an_encrypted_run_leaves_no_plaintext_in_any_file(tmp_path: Path) -> None:
    """Steps, tools, artifacts, memory items, a failure, an interrupt and its answer: all ciphertext.

    In every file of the data directory, the WALs of the log and of the memory store included.
    """
    out = _run_to_the_end(tmp_path, EncryptionCodec(KEY))
    assert out == "ZEBRA-INPUT ZEBRA-STEP-OUT ZEBRA-TOOL-OUT ZEBRA-ARTIFACT body ZEBRA-ANSWER"
    assert _leaks(tmp_path) == []
    # The WAL of an open world too, before any checkpoint folds it into the file.
    world = _world(tmp_path, EncryptionCodec(KEY), artifact_threshold=256)
    with pytest.raises(RunInterrupted):
        asyncio.run(durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r2"))
    assert (tmp_path / "events.db-wal").exists()
    assert (tmp_path / "memory" / "memory.db-wal").exists()
    assert _leaks(tmp_path) == []
    world.close()
    # A snapshot is a row like any other.
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        durable.compact("r1", world=world)
        world.vacuum()
    assert _leaks(tmp_path) == []
    with _world(tmp_path, EncryptionCodec(KEY), artifact_threshold=256) as world:
        again = asyncio.run(durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1"))
    assert again == out


def test_opening_without_the_key_or_with_another_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    _run_to_the_end(tmp_path, EncryptionCodec(KEY))
    before = _files(tmp_path)
    kid = EncryptionCodec(KEY).key_id
    with pytest.raises(KeyMismatchError, match=kid) as no_key:
        durable.local_world(tmp_path)
    assert no_key.value.key_id == kid
    with pytest.raises(KeyMismatchError, match=kid) as wrong:
        durable.local_world(tmp_path, codec=EncryptionCodec(OTHER))
    assert wrong.value.key_id == kid
    after = _files(tmp_path)
    assert {k: v for k, v in after.items() if not k.endswith("-shm")} == {
        k: v for k, v in before.items() if not k.endswith("-shm")
    }


def test_a_codec_on_a_plain_log_with_runs_is_refused(tmp_path: Path) -> None:
    _run_to_the_end(tmp_path, None)
    with pytest.raises(CodecError, match="little rekey"):
        durable.local_world(tmp_path, codec=EncryptionCodec(KEY))


def test_old_payloads_are_read_after_a_rotation(tmp_path: Path) -> None:
    """New payloads go under the first key; rows and artifacts under an old key are still read."""
    codec = EncryptionCodec(KEY)
    with (
        _world(tmp_path, codec, artifact_threshold=256) as world,
        pytest.raises(RunInterrupted),
    ):
        asyncio.run(durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1"))
    rotated = EncryptionCodec(OTHER, old_keys=[KEY])
    with _world(tmp_path, rotated, artifact_threshold=256) as world:
        out = asyncio.run(
            durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r1", resume="ZEBRA-ANSWER")
        )
        assert out.endswith("ZEBRA-ANSWER")
        key_ids = {_key_id_of(row[2]) for row in world.log.inner.read("r1")}  # type: ignore[attr-defined]
    assert key_ids == {codec.key_id, rotated.key_id}  # the old rows stay, the new ones use the new key
    with pytest.raises(KeyMismatchError, match=codec.key_id):  # without the old key: refused, typed
        durable.local_world(tmp_path, codec=EncryptionCodec(OTHER))


def _key_id_of(data: bytes) -> str:
    return data[1:5].hex()


def test_a_ciphertext_moved_to_another_row_is_refused(tmp_path: Path) -> None:
    _run_to_the_end(tmp_path, EncryptionCodec(KEY))
    db = sqlite3.connect(tmp_path / "events.db")
    rows = db.execute("SELECT seq, type, data FROM events WHERE run_id = 'r1' ORDER BY seq").fetchall()
    # Copy the payload of one step.completed over another of the same type: same type, other seq.
    done = [r for r in rows if r[1] == "step.completed"]
    assert len(done) >= 2
    db.execute("UPDATE events SET data = ? WHERE run_id = 'r1' AND seq = ?", (done[0][2], done[1][0]))
    db.commit()
    db.close()
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        with pytest.raises(CodecError, match=f"event {done[1][0]} "):
            world.events("r1")
        report = verify_run(world, "r1")
    assert any(f"event {done[1][0]} " in p for p in report["problems"])


def test_a_row_moved_to_another_run_is_refused() -> None:
    log = EncryptedLog(MemoryLog(), EncryptionCodec(KEY))
    sealed = log.seal("a", (1, "run.started", '{"secret": 1}'))
    assert log.open("a", sealed) == (1, "run.started", '{"secret": 1}')
    with pytest.raises(CodecError):
        log.open("b", sealed)
    with pytest.raises(CodecError):
        log.open("a", (2, "run.started", sealed[2]))
    with pytest.raises(CodecError):
        log.open("a", (1, "run.completed", sealed[2]))
    with pytest.raises(CodecError, match="not encrypted"):
        log.open("a", (1, "run.started", '{"plain": true}'))


def test_a_backend_that_stores_only_text_gets_base64_text() -> None:
    class TextOnly(MemoryLog):
        stores_bytes = False

    log = EncryptedLog(TextOnly(), EncryptionCodec(KEY))
    sealed = log.seal("a", (1, "run.started", '{"secret": 1}'))
    assert sealed[2].startswith("enc1:") and "secret" not in sealed[2]
    assert log.open("a", sealed) == (1, "run.started", '{"secret": 1}')
    with pytest.raises(CodecError):
        log.open("b", sealed)


def test_a_memory_world_takes_a_codec() -> None:
    world = durable.memory_world(codec=EncryptionCodec(KEY))
    world.memory.configure(durable.lexical_embedder(dim=64))
    with pytest.raises(RunInterrupted):
        asyncio.run(durable.run_workflow(agent, "ZEBRA-INPUT", world=world, run_id="r"))
    inner = world.log.inner  # type: ignore[attr-defined]
    assert all(type(data) is bytes and b"ZEBRA" not in data for _, _, data in inner.read("r"))
    assert all(b"ZEBRA" not in blob for blob in world.artifacts.inner.blobs.values())  # type: ignore[attr-defined]
    items = world.memory._db.query("SELECT text, metadata FROM items")
    assert len(items) == 2
    assert all(type(c) is bytes and b"ZEBRA" not in c for row in items for c in row)


class _KmsCodec:
    """A codec of the application's own: the protocol is all a world needs (here, a toy 'KMS')."""

    key_id = "kms-1"

    def __init__(self) -> None:
        self._inner = EncryptionCodec(KEY)
        self.calls = 0

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        self.calls += 1
        return self._inner.encrypt(plaintext, associated_data)

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        return self._inner.decrypt(ciphertext, associated_data)

    def digests(self, data: bytes) -> list[str]:
        return self._inner.digests(data)


def test_a_codec_of_ones_own_plugs_in(tmp_path: Path) -> None:
    codec = _KmsCodec()
    assert isinstance(codec, durable.Codec)
    out = _run_to_the_end(tmp_path, codec)
    assert out.endswith("ZEBRA-ANSWER") and codec.calls > 0
    assert _leaks(tmp_path) == []


def test_a_codec_without_the_protocol_is_refused(tmp_path: Path) -> None:
    with pytest.raises(durable.ConfigurationError, match=r"durable\.Codec"):
        durable.local_world(tmp_path, codec=object())  # type: ignore[arg-type]


def test_keys_must_be_32_bytes() -> None:
    with pytest.raises(durable.ConfigurationError, match="32 bytes"):
        EncryptionCodec(b"short")
    with pytest.raises(durable.ConfigurationError, match="32 bytes"):
        EncryptionCodec(KEY, old_keys=[b"x" * 16])


def test_an_encrypted_sqlite_log_opened_raw_shows_only_ciphertext(tmp_path: Path) -> None:
    _run_to_the_end(tmp_path, EncryptionCodec(KEY))
    raw = SqliteLog(tmp_path / "events.db")
    try:
        assert all(type(d) is bytes for _, _, d in raw.read("r1"))
    finally:
        raw.close()
    assert os.path.exists(tmp_path / "events.db")


@durable.workflow
async def queued(x: str) -> str:
    return await summarise(x)


def test_a_queued_run_s_input_is_encrypted_in_the_control_store(tmp_path: Path) -> None:
    """start_workflow(queue=) keeps the input in runtime.db until a worker starts it: sealed too."""

    async def main() -> str:
        with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
            run = durable.start_workflow(queued, "ZEBRA-INPUT", world=world, queue="q")
            assert (tmp_path / "runtime.db").exists()
            assert _leaks(tmp_path) == []  # enqueued, not started: only the control record holds it
            async with durable.Worker(world, workflows=[queued], queues=["q"]):
                out: str = await run.result(timeout=60)
            return out

    assert "ZEBRA-INPUT" in asyncio.run(main())
    assert _leaks(tmp_path) == []
