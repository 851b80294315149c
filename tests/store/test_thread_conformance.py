"""The thread stores that ship pass the conformance rules: memory, SQLite, Postgres, and sealed by a codec."""

from __future__ import annotations

from pathlib import Path

import pytest

import durable
from durable.store import (
    EncryptedThreads,
    MemoryLog,
    MemoryThreads,
    SqliteLog,
    SqliteThreads,
    ThreadStore,
    threads_for,
)
from durable.store.conformance_threads import NS, ThreadStoreConformance
from tests.helpers.pg import OnPostgres

KEY = bytes(range(32))


class TestMemoryThreads(ThreadStoreConformance):
    @pytest.fixture(autouse=True)
    def _places(self) -> None:
        self.stores: dict[Path, MemoryThreads] = {}

    def open_store(self, where: Path) -> ThreadStore:
        return self.stores.setdefault(where, MemoryThreads())


class TestSqliteThreads(ThreadStoreConformance):
    def open_store(self, where: Path) -> ThreadStore:
        return SqliteThreads(where / "threads.db")


class TestEncryptedThreads(ThreadStoreConformance):
    def open_store(self, where: Path) -> ThreadStore:
        return EncryptedThreads(SqliteThreads(where / "threads.db"), durable.EncryptionCodec(KEY))


class TestPostgresThreads(OnPostgres, ThreadStoreConformance):
    def open_store(self, where: Path) -> ThreadStore:
        return threads_for(self.open_log())


def test_a_sealed_value_does_not_open_under_another_key_or_thread(tmp_path: Path) -> None:
    """A ciphertext moved to another key, or a plain value in a sealed store, fails with ``CodecError``."""
    plain = SqliteThreads(tmp_path / "threads.db")
    sealed = EncryptedThreads(plain, durable.EncryptionCodec(KEY))
    sealed.write(NS, "t", [("a", b"secret")])
    stored = plain.get(NS, "t", "a")
    assert stored is not None and b"secret" not in stored.value
    plain.write(NS, "t", [("b", stored.value), ("c", b"plain")])
    for key in ("b", "c"):
        with pytest.raises(durable.CodecError, match="does not decrypt in its place"):
            sealed.get(NS, "t", key)


def test_a_world_keeps_its_threads_beside_its_log(tmp_path: Path) -> None:
    """``world.threads`` is ``threads.db`` beside ``events.db``, and one store per memory log."""
    with durable.local_world(tmp_path / "data") as world:
        world.threads.write(NS, "t", [("a", b"1")])
        assert isinstance(world.threads, SqliteThreads)
    assert (tmp_path / "data" / "threads.db").exists()
    with durable.local_world(tmp_path / "data", codec=durable.EncryptionCodec(KEY)) as sealed_world:
        assert isinstance(sealed_world.threads, EncryptedThreads)
    log = MemoryLog()
    assert threads_for(log) is threads_for(log)
    assert isinstance(threads_for(SqliteLog(tmp_path / "x.db")), SqliteThreads)
