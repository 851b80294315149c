"""Talking to an encrypted world: messages, events, streams and the outbox leave no plaintext on disk."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import CodecError, EncryptionCodec, KeyMismatchError
from durable.store import EncryptedLog, MemoryLog, SqliteLog, messages_for, outbox_for
from durable.store.encrypted._log import row_ad
from durable.store.messages._beside_log import keeps_outbox

pytest.importorskip("cryptography")

KEY = bytes(range(32))

MARKS = [
    b"ZEBRA-TALK-INPUT",
    b"ZEBRA-MSG-BEFORE",
    b"ZEBRA-MSG-DURING",
    b"ZEBRA-MSG-FROM-RUN",
    b"ZEBRA-EVENT",
    b"ZEBRA-STREAM",
    b"ZEBRA-OUTBOX-ARG",
    b"ZEBRA-OUTBOX-RESULT",
    b"ZEBRA-TALK-RESULT",
]
"""Every value of the talking run carries one of these; none may appear in any file of the data directory."""

DELIVERED: list[str] = []


@durable.tool(outbox=True, retry=durable.RetryPolicy(max_attempts=2, backoff=0))
async def notify(to: str, body: str) -> str:
    DELIVERED.append(body)
    return f"{body} ZEBRA-OUTBOX-RESULT"


@durable.workflow
async def sink() -> Any:
    return await durable.recv("from-run", timeout=3600)


@durable.workflow
async def chatty(x: str) -> str:
    before = await durable.recv()  # sent before the run started
    durable.set_event("status", {"said": "ZEBRA-EVENT", "got": before})
    await durable.write_stream("tokens", "ZEBRA-STREAM one")
    durable.close_stream("tokens")
    during = await durable.recv("later")  # sent while the run waits
    await durable.send("sink1", "ZEBRA-MSG-FROM-RUN", topic="from-run")
    await notify("ops@example.com", f"{x} ZEBRA-OUTBOX-ARG")
    return f"{before['m']} {during} ZEBRA-TALK-RESULT"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _leaks(root: Path) -> list[tuple[str, bytes]]:
    return [(name, m) for name, data in _files(root).items() for m in MARKS if m in data]


def _talk(data: Path, codec: Any) -> str:
    """Start the run on a queue, message it before and during, and let a Worker drive it and its outbox."""

    async def main() -> str:
        DELIVERED.clear()
        with durable.local_world(data, codec=codec) as world:
            durable.start_workflow(sink, world=world, run_id="sink1", queue="q")
            run = durable.start_workflow(chatty, "ZEBRA-TALK-INPUT", world=world, run_id="t1", queue="q")
            await durable.send("t1", {"m": "ZEBRA-MSG-BEFORE"}, world=world)
            async with durable.Worker(world, workflows=[chatty, sink], queues=["q"]):
                status = await run.get_event("status", timeout=60)
                assert status == {"said": "ZEBRA-EVENT", "got": {"m": "ZEBRA-MSG-BEFORE"}}
                assert [v async for v in run.read_stream("tokens")] == ["ZEBRA-STREAM one"]
                await run.send("ZEBRA-MSG-DURING", topic="later")
                out: str = await run.result(timeout=60)
                assert await durable.handle("sink1", world=world).result(timeout=60) == "ZEBRA-MSG-FROM-RUN"
                store = world.open_outbox()
                for _ in range(6000):  # the worker's dispatcher delivers the entry
                    (entry,) = store.entries(run_id="t1")
                    if entry.state == "delivered":
                        break
                    await asyncio.sleep(0.01)
                assert entry.state == "delivered" and "ZEBRA-OUTBOX-RESULT" in (entry.result or "")
                assert "ZEBRA-OUTBOX-ARG" in entry.input
                assert DELIVERED == ["ZEBRA-TALK-INPUT ZEBRA-OUTBOX-ARG"]
                texts = [m.data for m in world.open_messages().messages("t1")]
                assert "ZEBRA-MSG-BEFORE" in texts[0] and "ZEBRA-MSG-DURING" in texts[1]
            return out

    return asyncio.run(main())


def test_without_a_codec_the_talk_marks_are_on_disk(tmp_path: Path) -> None:
    """The scan finds every value of a plain world's talk: the encrypted test below means something."""
    out = _talk(tmp_path, None)
    assert out == "ZEBRA-MSG-BEFORE ZEBRA-MSG-DURING ZEBRA-TALK-RESULT"
    assert {m for _, m in _leaks(tmp_path)} == set(MARKS)


def test_an_encrypted_world_s_talk_leaves_no_plaintext_in_any_file(tmp_path: Path) -> None:
    """Messages (before, during, from a run), an event, a stream and an outbox call: all ciphertext."""
    out = _talk(tmp_path, EncryptionCodec(KEY))
    assert out == "ZEBRA-MSG-BEFORE ZEBRA-MSG-DURING ZEBRA-TALK-RESULT"
    assert _leaks(tmp_path) == []
    db = sqlite3.connect(tmp_path / "events.db")
    try:
        stored = db.execute("SELECT run_id, topic, data FROM messages ORDER BY id").fetchall()
        entries = db.execute("SELECT key, tool, input, result FROM outbox").fetchall()
    finally:
        db.close()
    assert [(r, t) for r, t, _ in stored] == [("t1", None), ("t1", "later"), ("sink1", "from-run")]
    assert all(d.startswith("enc1:") for _, _, d in stored)  # the identifiers stay in the clear
    ((key, tool, arg, result),) = entries
    assert key.startswith("t1:") and tool.endswith("notify")
    assert arg.startswith("enc1:") and result.startswith("enc1:")
    kid = EncryptionCodec(KEY).key_id
    with pytest.raises(KeyMismatchError, match=kid):  # without the key: refused before any read
        durable.local_world(tmp_path)


def test_the_consume_path_seals_the_received_row_as_append_does(tmp_path: Path) -> None:
    """The message.received row, written in the message store's own transaction, decrypts in its place."""
    codec = EncryptionCodec(KEY)
    _talk(tmp_path, codec)
    raw = SqliteLog(tmp_path / "events.db")
    log = EncryptedLog(raw, codec)
    try:
        rows = raw.read("t1")
        received = [r for r in rows if r[1] == "message.received"]
        assert len(received) == 2
        for seq, type_, data in received:
            assert type(data) is bytes  # a BLOB, as EncryptedLog.append stores it
            plain = codec.decrypt(data, row_ad("t1", seq, type_)).decode()
            assert "ZEBRA-MSG-" in plain
        opened = log.read("t1")  # every row of the run decrypts through the log
        assert [r[1] for r in opened] == [r[1] for r in rows]
        assert sum("ZEBRA-MSG-" in d for _, t, d in opened if t == "message.received") == 2
    finally:
        log.close()


def test_a_message_ciphertext_moved_to_another_message_is_refused(tmp_path: Path) -> None:
    """A value copied over another message's (another topic, another run) does not decrypt."""
    _talk(tmp_path, EncryptionCodec(KEY))
    db = sqlite3.connect(tmp_path / "events.db")
    first = db.execute("SELECT data FROM messages WHERE run_id = 't1' AND topic IS NULL").fetchone()[0]
    db.execute("UPDATE messages SET data = ? WHERE run_id = 'sink1'", (first,))
    db.commit()
    db.close()
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        store = world.open_messages()
        assert len(store.messages("t1")) == 2  # the original still decrypts
        with pytest.raises(CodecError, match="sink1"):
            store.messages("sink1")


def test_an_outbox_ciphertext_moved_to_another_field_or_entry_is_refused(tmp_path: Path) -> None:
    _talk(tmp_path, EncryptionCodec(KEY))
    db = sqlite3.connect(tmp_path / "events.db")
    key, arg = db.execute("SELECT key, input FROM outbox").fetchone()
    db.execute("UPDATE outbox SET result = ? WHERE key = ?", (arg, key))  # the input as the result
    db.commit()
    db.close()
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        store = world.open_outbox()
        with pytest.raises(CodecError, match="result of outbox entry"):
            store.get(key)


def test_a_memory_world_s_messages_and_outbox_are_encrypted() -> None:
    world = durable.memory_world(codec=EncryptionCodec(KEY))

    async def main() -> str:
        run = durable.start_workflow(chatty, "ZEBRA-TALK-INPUT", world=world, run_id="m1")
        durable.start_workflow(sink, world=world, run_id="sink1")
        await durable.send("m1", {"m": "ZEBRA-MSG-BEFORE"}, world=world)
        await run.send("ZEBRA-MSG-DURING", topic="later")
        out: str = await run.result(timeout=60)
        return out

    assert asyncio.run(main()).endswith("ZEBRA-TALK-RESULT")
    inner = world.log.inner  # type: ignore[attr-defined]
    assert all(type(d) is bytes and b"ZEBRA" not in d for _, _, d in inner.read("m1"))
    plain_store = messages_for(inner)
    assert all(m.data.startswith("enc1:") and "ZEBRA" not in m.data for m in plain_store.messages("m1"))
    (entry,) = outbox_for(inner).entries(run_id="m1")
    assert entry.input.startswith("enc1:") and "ZEBRA" not in entry.input


def test_rekey_rewrites_messages_and_outbox_entries(tmp_path: Path) -> None:
    """After a rekey to another key, and then to the clear, messages and entries read under the new one."""
    from durable.ops._rekey import rekey

    other = EncryptionCodec(bytes(range(1, 33)))
    _talk(tmp_path, EncryptionCodec(KEY))
    done = rekey(tmp_path, other, EncryptionCodec(KEY))
    assert done["messages"] == 4  # three messages and one outbox entry
    assert _leaks(tmp_path) == []
    with durable.local_world(tmp_path, codec=other) as world:  # the old key is not needed any more
        texts = [m.data for m in world.open_messages().messages("t1")]
        (entry,) = world.open_outbox().entries(run_id="t1")
    assert "ZEBRA-MSG-BEFORE" in texts[0] and "ZEBRA-OUTBOX-RESULT" in (entry.result or "")
    rekey(tmp_path, None, other)
    with durable.local_world(tmp_path) as world:
        texts = [m.data for m in world.open_messages().messages("t1")]
        (entry,) = world.open_outbox().entries(run_id="t1")
    assert texts[1] == '"ZEBRA-MSG-DURING"' and "ZEBRA-OUTBOX-ARG" in entry.input


class _MetaOnly:
    """A log that keeps meta facts but no outbox and no messages (as a backend without them would)."""

    def __init__(self) -> None:
        self._inner = MemoryLog()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_an_encrypted_log_over_a_backend_without_an_outbox_keeps_none() -> None:
    """The wrapper offers the stores of its inner log only: a worker does not dispatch what is not there."""
    log = EncryptedLog(_MetaOnly(), EncryptionCodec(KEY))  # type: ignore[arg-type]
    assert not keeps_outbox(log)
    assert keeps_outbox(EncryptedLog(MemoryLog(), EncryptionCodec(KEY)))
    with pytest.raises(durable.ConfigurationError, match="keeps no messages"):
        messages_for(log)
    with pytest.raises(durable.ConfigurationError, match="has no outbox"):
        outbox_for(log)


def test_little_outbox_reads_an_encrypted_world_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`little outbox` lists a dead entry of an encrypted world under LITTLE_KEY, and re-drives it."""
    from durable.cli import main

    _talk(tmp_path, EncryptionCodec(KEY))
    db = sqlite3.connect(tmp_path / "events.db")
    (key,) = db.execute("SELECT key FROM outbox").fetchone()
    db.execute("UPDATE outbox SET state = 'dead'")  # as if every attempt had failed
    db.commit()
    db.close()
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    assert main(["outbox", "--dead", "--data-dir", str(tmp_path)]) == 0
    assert key in capsys.readouterr().out
    assert main(["outbox", "retry", key, "--data-dir", str(tmp_path)]) == 0
    assert "pending" in capsys.readouterr().out
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        entry = world.open_outbox().get(key)
    assert entry is not None and entry.state == "pending" and "ZEBRA-OUTBOX-ARG" in entry.input
