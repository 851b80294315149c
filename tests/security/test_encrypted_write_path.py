"""An encrypted world writes what a plain one writes: the same appends, sync flags and statements."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.store import Append, EncryptedLog, SqliteLog

pytest.importorskip("cryptography")

KEY = bytes(range(32))


@durable.tool
async def echo(i: int) -> int:
    return i


@durable.step(max_visits=100)
async def with_tool(i: int) -> int:
    return await echo(i)


@durable.step(max_visits=100)
async def trivial(i: int) -> int:
    return i


@durable.workflow
async def steps(n: int) -> int:
    for i in range(n):
        await with_tool(i)
        await trivial(i)
    return n


def _statement(sql: str) -> str:
    """What a statement does, without its values (a ciphertext or a time differs between runs)."""
    words = sql.split()
    if words[0].upper() == "PRAGMA":
        return sql.strip()  # a synchronous= toggle is a statement of its own
    return " ".join(words[:3]).upper()


def _record(tmp: Path, codec: durable.EncryptionCodec | None, durability: str) -> dict[str, Any]:
    """Run ``steps`` once and record what reaches the SQLite log: every append and every statement."""
    appends: list[tuple[bool, list[tuple[int, str]], str | None, object, set[type]]] = []
    statements: list[str] = []
    with durable.local_world(tmp, durability=durability, codec=codec) as world:  # type: ignore[arg-type]
        asyncio.run(durable.run_workflow(steps, 1, world=world, run_id="warm"))
        backend = world.log.inner if codec is not None else world.log  # type: ignore[attr-defined]
        assert isinstance(backend, SqliteLog)
        forward = backend.append

        def spy(batch: Sequence[Append], *, sync: bool = True) -> None:
            for a in batch:
                kinds = {type(d) for _, _, d in a.rows}
                appends.append((sync, [(s, t) for s, t, _ in a.rows], a.status, a.created, kinds))
            forward(batch, sync=sync)

        backend.append = spy  # type: ignore[method-assign]
        backend._db.set_trace_callback(statements.append)
        try:
            assert asyncio.run(durable.run_workflow(steps, 5, world=world, run_id="r")) == 5
        finally:
            backend._db.set_trace_callback(None)
    return {"appends": appends, "statements": [_statement(s) for s in statements]}


@pytest.mark.parametrize("durability", ["process", "power"])
def test_an_encrypted_run_writes_the_appends_and_statements_of_a_plain_one(
    tmp_path: Path, durability: str
) -> None:
    """No commit, sync, meta write or ``synchronous`` toggle of its own: only the payloads differ."""
    plain = _record(tmp_path / "plain", None, durability)
    sealed = _record(tmp_path / "sealed", durability=durability, codec=durable.EncryptionCodec(KEY))
    strip = [(s, rows, st, cr) for s, rows, st, cr, _ in plain["appends"]]
    assert [(s, rows, st, cr) for s, rows, st, cr, _ in sealed["appends"]] == strip
    assert sealed["statements"] == plain["statements"]
    # What the test compares is there: unsynced tool receipts between synced commits.
    assert [s for s, *_ in plain["appends"]].count(False) == 5
    assert len(plain["appends"]) >= 15 and any(s.startswith("INSERT") for s in plain["statements"])
    if durability == "power":
        assert "PRAGMA synchronous=NORMAL" in plain["statements"]
    assert all(k == {str} for *_, k in plain["appends"])
    # sqlite3 binds a bytearray as it is (a bytes object goes through its adapter lookup first).
    assert all(k == {bytearray} for *_, k in sealed["appends"])


def test_an_encrypted_sqlite_log_stores_blobs_that_read_back_as_bytes(tmp_path: Path) -> None:
    log = EncryptedLog(SqliteLog(tmp_path / "events.db"), durable.EncryptionCodec(KEY))
    token = log.fence("r")
    log.append([Append("r", [(1, "run.started", '{"card": "4242"}')], token, created=("wf", None))])
    log.compact("r", (2, "run.snapshot", '{"card": "4242", "n": 2}'), token)
    log.close()
    db = sqlite3.connect(tmp_path / "events.db")
    kinds = [r[0] for r in db.execute("SELECT typeof(data) FROM events WHERE run_id = 'r'")]
    db.close()
    assert kinds == ["blob"]
    again = EncryptedLog(SqliteLog(tmp_path / "events.db"), durable.EncryptionCodec(KEY))
    assert again.read("r") == [(2, "run.snapshot", '{"card": "4242", "n": 2}')]
    assert all(type(d) is bytes for _, _, d in again.inner.read("r"))
    again.close()


def test_appends_of_several_runs_in_one_batch_each_bind_their_own_run(tmp_path: Path) -> None:
    """Rows of runs taking turns in one batch decrypt in their own run only."""
    log = EncryptedLog(SqliteLog(tmp_path / "events.db"), durable.EncryptionCodec(KEY))
    tokens = {r: log.fence(r) for r in ("a", "bb", "a2")}
    log.append(
        [
            Append(r, [(1, "run.started", f'{{"run": "{r}"}}')], tokens[r], created=("wf", None))
            for r in ("a", "bb", "a2")
        ]
    )
    log.append([Append("a", [(2, "step.started", '{"n": 2}')], tokens["a"])])
    log.append([Append("bb", [(2, "step.started", '{"n": 3}')], tokens["bb"])])
    assert log.read("a") == [(1, "run.started", '{"run": "a"}'), (2, "step.started", '{"n": 2}')]
    assert log.read("bb") == [(1, "run.started", '{"run": "bb"}'), (2, "step.started", '{"n": 3}')]
    assert log.read("a2") == [(1, "run.started", '{"run": "a2"}')]
    moved = log.inner.read("a")[1]
    with pytest.raises(durable.errors.CodecError, match="does not decrypt in its place"):
        log.open("bb", moved)
    log.close()


def test_the_codecs_encrypter_gives_what_encrypt_gives_with_a_fresh_nonce_each_call() -> None:
    """Its ciphertexts decrypt with ``decrypt``, in the form asked for, and never share a nonce."""
    codec = durable.EncryptionCodec(KEY)
    encrypt = codec.encrypter(bytearray)
    sealed = [encrypt(b"card 4242", b"where") for _ in range(600)]  # past one refill of the nonce pool
    assert all(type(ct) is bytearray for ct in sealed)
    assert {bytes(ct[:5]) for ct in sealed} == {bytes(codec.encrypt(b"x", b"y")[:5])}
    assert all(codec.decrypt(bytes(ct), b"where") == b"card 4242" for ct in sealed)
    assert len({bytes(ct[5:17]) for ct in sealed}) == 600
