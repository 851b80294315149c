"""The memory store of an encrypted world: texts and metadata sealed, search and filters unchanged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durable
from durable import CodecError, EncryptionCodec, KeyMismatchError
from durable.cli import main
from tests.memory.test_memory_filter import filters, metadata

pytest.importorskip("cryptography")

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
SECRET = b"OKAPI-SECRET"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def _store(path: Path | None, codec: Any = None) -> durable.MemoryStore:
    return durable.MemoryStore(path, codec=codec).configure(durable.lexical_embedder(dim=32))


def _fill(store: durable.MemoryStore) -> None:
    run(store.put(("users", "u1"), "tea", "OKAPI-SECRET drinks green tea", {"kind": "OKAPI-SECRET", "n": 1}))
    run(store.put(("users", "u1"), "bike", "rides a red bicycle", {"kind": "fact", "n": 2}))
    run(store.put(("users", "u2"), "cat", "the cat sleeps", {"kind": "fact", "n": 3}))


def _raw(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.iterdir()) if p.is_file())


def test_texts_and_metadata_are_ciphertext_and_everything_reads_back(tmp_path: Path) -> None:
    """get, search, filters, namespaces and count on an encrypted store; no plaintext in its files."""
    path = tmp_path / "memory.db"
    store = _store(path, EncryptionCodec(KEY))
    _fill(store)
    got = run(store.get(("users", "u1"), "tea"))
    assert got is not None and got.text == "OKAPI-SECRET drinks green tea"
    assert got.metadata == {"kind": "OKAPI-SECRET", "n": 1}
    hits = run(store.search(("users",), "green tea", k=3))
    assert hits[0].key == "tea" and hits[0].metadata["kind"] == "OKAPI-SECRET"
    assert {h.key for h in run(store.search(("users",), "tea", k=3, filter={"n": {"$gte": 2}}))} == {
        "bike",
        "cat",
    }
    assert [h.key for h in run(store.search(("users",), "tea", filter={"kind": "OKAPI-SECRET"}))] == ["tea"]
    assert [h.key for h in run(store.search(("users", "u2"), "tea", filter={"kind": "fact"}))] == ["cat"]
    assert run(store.namespaces()) == [("users", "u1"), ("users", "u2")]
    assert run(store.count(("users", "u1"))) == 2
    assert run(store.delete(("users", "u1"), "bike")) is True
    rows = store._db.query("SELECT ns, key, text, metadata FROM items")
    assert all(type(t) is bytes and type(m) is bytes for _, _, t, m in rows)
    store.close()
    assert SECRET not in _raw(path)
    # What stays in the clear, as the security page says: namespaces and keys.
    assert b'["users","u1"]' in _raw(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(metadata, min_size=1, max_size=8), filters)
def test_a_filter_selects_the_same_items_encrypted_or_not(
    metas: list[dict[str, Any]], flt: dict[str, Any]
) -> None:
    """For any metadata and any filter, the encrypted store returns exactly the plain store's hits."""
    plain, sealed = _store(None), _store(None, EncryptionCodec(KEY))
    try:
        for store in (plain, sealed):
            run(
                store.put_many(
                    {"namespace": ("n",), "key": f"k{i}", "text": f"item {i} words", "metadata": m}
                    for i, m in enumerate(metas)
                )
            )

        def keys(store: durable.MemoryStore) -> list[tuple[str, float]]:
            hits = run(store.search(("n",), "item words", k=len(metas), filter=flt))
            return [(h.key, round(h.distance, 6)) for h in hits]

        assert keys(sealed) == keys(plain)
    finally:
        plain.close()
        sealed.close()


def test_opening_without_the_key_or_with_another_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = _store(path, EncryptionCodec(KEY))
    _fill(store)
    store.close()
    before = path.read_bytes()
    kid = EncryptionCodec(KEY).key_id
    with pytest.raises(KeyMismatchError, match=kid) as no_key:
        durable.MemoryStore(path)
    assert no_key.value.key_id == kid
    with pytest.raises(KeyMismatchError, match=kid) as wrong:
        durable.MemoryStore(path, codec=EncryptionCodec(OTHER))
    assert wrong.value.key_id == kid
    assert path.read_bytes() == before


def test_a_codec_on_a_plain_store_with_items_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = _store(path)
    _fill(store)
    store.close()
    with pytest.raises(CodecError, match="little rekey"):
        durable.MemoryStore(path, codec=EncryptionCodec(KEY))


def test_items_under_an_old_key_are_read_after_a_rotation(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = _store(path, EncryptionCodec(KEY))
    _fill(store)
    store.close()
    rotated = _store(path, EncryptionCodec(OTHER, old_keys=[KEY]))
    run(rotated.put(("users", "u3"), "new", "a new item", {"kind": "fact"}))
    assert run(rotated.get(("users", "u1"), "tea")).text.startswith("OKAPI")  # type: ignore[union-attr]
    assert {h.key for h in run(rotated.search((), "item tea", k=5, filter={"kind": "fact"}))} == {
        "bike",
        "cat",
        "new",
    }
    rotated.close()


def test_a_ciphertext_moved_to_another_item_or_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = _store(path, EncryptionCodec(KEY))
    _fill(store)
    db = store._db
    (tea_text,) = db.query("SELECT text FROM items WHERE key = 'tea'")[0]
    db.run("UPDATE items SET text = ? WHERE key = 'bike'", [tea_text])
    with pytest.raises(CodecError, match=r"'bike'.*does not decrypt in its place"):
        run(store.get(("users", "u1"), "bike"))
    db.run("UPDATE items SET metadata = ? WHERE key = 'cat'", [tea_text])  # a text as metadata
    with pytest.raises(CodecError, match="metadata of memory item 'cat'"):
        run(store.search(("users", "u2"), "cat", filter={"kind": "fact"}))
    db.run("UPDATE items SET metadata = ? WHERE key = 'tea'", [json.dumps({"kind": "fact"})])
    with pytest.raises(CodecError, match="not encrypted"):
        run(store.get(("users", "u1"), "tea"))
    store.close()


def test_little_rekey_encrypts_rotates_and_decrypts_the_memory_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with durable.local_world(tmp_path) as world:
        world.memory.configure(durable.lexical_embedder(dim=32))
        _fill(world.memory)
    mem = tmp_path / "memory" / "memory.db"
    assert SECRET in _raw(mem)
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0
    assert "3 memory items" in capsys.readouterr().out
    assert SECRET not in _raw(mem)  # rewritten, vacuumed, WAL truncated
    monkeypatch.setenv("LITTLE_KEY", OTHER.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0
    with pytest.raises(KeyMismatchError):
        durable.MemoryStore(mem, codec=EncryptionCodec(KEY))
    with durable.local_world(tmp_path, codec=EncryptionCodec(OTHER)) as world:
        got = run(world.memory.get(("users", "u1"), "tea"))
        assert got is not None and got.metadata["kind"] == "OKAPI-SECRET"
    monkeypatch.delenv("LITTLE_OLD_KEYS")
    assert main(["rekey", "--decrypt", "--data-dir", str(tmp_path)]) == 0
    with durable.local_world(tmp_path) as world:
        got = run(world.memory.get(("users", "u2"), "cat"))
        assert got is not None and got.text == "the cat sleeps"


def test_rekey_without_the_memory_stores_key_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        world.memory.configure(durable.lexical_embedder(dim=32))
        _fill(world.memory)
    before = {p: p.read_bytes() for p in (tmp_path / "events.db", tmp_path / "memory" / "memory.db")}
    monkeypatch.setenv("LITTLE_KEY", OTHER.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 1
    assert EncryptionCodec(KEY).key_id in capsys.readouterr().err
    assert {p: p.read_bytes() for p in before} == before
