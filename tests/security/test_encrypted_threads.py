"""The thread store of an encrypted data directory: sealed values, and ``little rekey`` rewrites them."""

from __future__ import annotations

from pathlib import Path

import durable
from durable import EncryptionCodec
from durable.ops._rekey import rekey

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
MARK = b"ZEBRA-conversation"
NS = "tests.conversation"


def _on_disk(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.glob("threads.db*"))


def test_a_sealed_world_keeps_no_thread_value_in_the_clear(tmp_path: Path) -> None:
    """Values written through ``world.threads`` under a codec are nowhere on disk in the clear."""
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        world.threads.write(NS, "chat-1", [("item:1", MARK)])
        got = world.threads.get(NS, "chat-1", "item:1")
        assert got is not None
        assert got.value == MARK
    assert MARK not in _on_disk(tmp_path)


def test_rekey_rewrites_thread_values_under_the_new_key_and_then_in_the_clear(tmp_path: Path) -> None:
    """After a rekey the values read under the new key only; a rekey to the clear leaves them plain."""
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        world.threads.write(NS, "chat-1", [("item:1", MARK), ("item:2", b"two")])
    done = rekey(tmp_path, EncryptionCodec(OTHER), EncryptionCodec(KEY))
    assert done["thread_values"] == 2
    assert MARK not in _on_disk(tmp_path)
    with durable.local_world(tmp_path, codec=EncryptionCodec(OTHER)) as world:
        assert [i.value for i in world.threads.items(NS, "chat-1")] == [MARK, b"two"]
    rekey(tmp_path, None, EncryptionCodec(OTHER))
    with durable.local_world(tmp_path) as world:
        assert [i.value for i in world.threads.items(NS, "chat-1")] == [MARK, b"two"]
