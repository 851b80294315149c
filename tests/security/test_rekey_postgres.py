"""``little rekey --dsn``: a Postgres world's schema rekeyed, SIGKILLed at random points, finished by a rerun.

Afterwards every value of every table is under the new key only (or in the
clear for a decrypt), the world opens with the new key alone and not with the
old one, and its runs read, resume and complete.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import EncryptionCodec, KeyMismatchError
from durable.cli import main
from durable.ops._rekey_postgres import TABLES
from durable.store import world_lock
from tests.helpers.audit_world import MARKS, fill, goes_on, parked
from tests.helpers.pg import Server, drop_schema, new_schema
from tests.security.test_plaintext_audit import pg_columns

pytest.importorskip("cryptography")

KEY = bytes(range(32))
NEW = bytes(range(2, 34))
BATCH = 3
"""Rows per transaction: small, so that a rekey of ``fill``'s world takes many transactions to kill in."""


@pytest.fixture
def schema(pgvector_server: Server) -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(pgvector_server.dsn, name)


def _filled(dsn: str, schema: str, codec: EncryptionCodec | None) -> None:
    with durable.postgres_world(dsn, schema=schema, codec=codec, artifact_threshold=256) as world:
        fill(world, memory=True)


def _env(key: bytes, old: bytes | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITTLE_", "DURABLE_DSN"))}
    env["LITTLE_KEY"] = key.hex()
    if old is not None:
        env["LITTLE_OLD_KEYS"] = old.hex()
    return env


def _journal(dsn: str, schema: str) -> dict[str, Any] | None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT value FROM \"{schema}\".documents WHERE namespace = 'meta' AND key = 'rekey'"
        ).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def _rekey_killed(dsn: str, schema: str, env: dict[str, str], point: int | str, *flags: str) -> bool:
    """Run ``little rekey --dsn`` in a child and SIGKILL it once the journal passes ``point``.

    ``point`` is a number of committed batches, or ``"tables"``: every table
    rewritten (the child is then vacuuming or writing the key check). Returns
    whether the child was killed (``False``: it finished first).
    """
    args = ["rekey", "--dsn", dsn, "--schema", schema, "--batch", str(BATCH), *flags]
    child = subprocess.Popen(
        [sys.executable, "-m", "durable.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    try:
        while child.poll() is None and time.monotonic() < deadline:
            j = _journal(dsn, schema)
            every_table = len(j["done"]) == len(TABLES) if j is not None else False
            if j is not None and (j["batches"] >= point if isinstance(point, int) else every_table):
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode == -signal.SIGKILL:
        return True
    assert child.returncode == 0, err
    return False


def _rerun(monkeypatch: pytest.MonkeyPatch, dsn: str, schema: str, env: dict[str, str], *flags: str) -> None:
    for name in ("LITTLE_KEY", "LITTLE_OLD_KEYS", "DURABLE_DSN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        if name.startswith("LITTLE_"):
            monkeypatch.setenv(name, value)
    assert main(["rekey", "--dsn", dsn, "--schema", schema, *flags]) == 0


BINARY = {("artifacts", "data"), ("memory_items", "sealed_text"), ("memory_items", "sealed_metadata")}
"""The columns that keep ciphertexts as bytes."""


def _sealed_key_ids(value: Any) -> list[str]:
    """The key id of each ciphertext in a stored value: a BYTEA, an ``enc1:``/``sealed:`` text, or in JSON."""
    if value is None:
        return []
    if isinstance(value, bytes | memoryview):
        raw = bytes(value)
        return [raw[1:5].hex()] if len(raw) > 33 and raw[0] == 1 else []
    text = str(value)
    for prefix in ("enc1:", "sealed:"):
        if text.startswith(prefix):
            return [base64.b64decode(text[len(prefix) :])[1:5].hex()]
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if isinstance(data, dict):
        return [k for v in data.values() if isinstance(v, str) for k in _sealed_key_ids(v)]
    return []


def _key_ids(dsn: str, schema: str) -> dict[str, set[str]]:
    """``table.column`` → the key ids of the ciphertexts it holds (columns without any left out)."""
    out: dict[str, set[str]] = {}
    for table, columns in pg_columns(dsn, schema).items():
        for column, values in columns.items():
            if (table, column) in BINARY:
                found = {k for v in values for k in _sealed_key_ids(v)}
            elif column in ("data", "input", "result", "error", "value", "manifest", "blocked"):
                found = {k for v in values if not isinstance(v, bytes) for k in _sealed_key_ids(v)}
            else:
                continue
            if found:
                out[f"{table}.{column}"] = found
    return out


def _plaintext(dsn: str, schema: str) -> set[str]:
    text = "\n".join(
        bytes(v).decode("latin-1") if isinstance(v, bytes | memoryview) else str(v)
        for columns in pg_columns(dsn, schema).values()
        for values in columns.values()
        for v in values
    )
    return {m for m in MARKS.values() if m in text}


def _runs_go_on(dsn: str, schema: str, codec: EncryptionCodec | None) -> None:
    """With the new key alone: the runs read, the waiting run and the queued ones complete."""
    goes_on(lambda clock: durable.postgres_world(dsn, schema=schema, codec=codec, clock=clock), memory=True)


def _check_rekeyed(dsn: str, schema: str, new: bytes | None, old: bytes) -> None:
    assert _journal(dsn, schema) is None
    ids = _key_ids(dsn, schema)
    if new is None:
        assert ids == {}
        assert _plaintext(dsn, schema) >= {MARKS["input"], MARKS["schedule"], MARKS["blocked_error"]}
    else:
        assert {k for found in ids.values() for k in found} == {EncryptionCodec(new).key_id}, ids
        assert _plaintext(dsn, schema) == set()
    with pytest.raises(KeyMismatchError):  # the old key alone reads nothing any more
        durable.postgres_world(dsn, schema=schema, codec=EncryptionCodec(old) if new is not None else None)
    _runs_go_on(dsn, schema, None if new is None else EncryptionCodec(new))


def test_a_rotation_killed_at_random_points_is_finished_by_a_rerun(
    pgvector_server: Server, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILLed after random numbers of batches and while vacuuming; each rerun goes on; the last ends."""
    dsn = pgvector_server.dsn
    _filled(dsn, schema, EncryptionCodec(KEY))
    assert _key_ids(dsn, schema)  # ciphertexts under KEY, in every sealed column
    env = _env(NEW, KEY)
    rng = random.Random(20261207)
    points: list[int | str] = sorted(rng.sample(range(1, 25), 4))
    killed = [_rekey_killed(dsn, schema, env, p) for p in [*points, "tables"]]
    assert sum(killed) >= 3, killed
    with pytest.raises(durable.ConfigurationError, match="was stopped before it finished"):
        durable.postgres_world(dsn, schema=schema, codec=EncryptionCodec(NEW, [KEY]))
    _rerun(monkeypatch, dsn, schema, env)
    _check_rekeyed(dsn, schema, NEW, KEY)


@pytest.mark.parametrize("mode", ["encrypt", "decrypt"])
def test_an_encryption_or_a_decryption_killed_midway_is_finished_by_a_rerun(
    pgvector_server: Server, schema: str, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A plain schema encrypted, or an encrypted one decrypted, killed twice, then finished."""
    dsn = pgvector_server.dsn
    _filled(dsn, schema, None if mode == "encrypt" else EncryptionCodec(KEY))
    env = _env(KEY, None)
    flags = ("--decrypt",) if mode == "decrypt" else ()
    killed = [_rekey_killed(dsn, schema, env, p, *flags) for p in (2, 11)]
    assert any(killed)
    _rerun(monkeypatch, dsn, schema, env, *flags)
    if mode == "encrypt":
        _check_rekeyed(dsn, schema, KEY, NEW)
    else:
        assert _key_ids(dsn, schema) == {} and _journal(dsn, schema) is None
        _runs_go_on(dsn, schema, None)


def test_a_stopped_rekey_refuses_another_target(
    pgvector_server: Server, schema: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rerun towards another key than the stopped rekey's names the key id that finishes it."""
    dsn = pgvector_server.dsn
    _filled(dsn, schema, EncryptionCodec(KEY))
    assert _rekey_killed(dsn, schema, _env(NEW, KEY), 2)
    monkeypatch.setenv("LITTLE_KEY", bytes(range(5, 37)).hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", f"{KEY.hex()},{NEW.hex()}")
    assert main(["rekey", "--dsn", dsn, "--schema", schema]) == 1
    err = capsys.readouterr().err
    assert EncryptionCodec(NEW).key_id in err and "finish" in err


def test_a_rekey_refuses_a_world_that_a_process_has_open(
    pgvector_server: Server, schema: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An open world (a worker, the inspector) makes the rekey refuse, naming its sessions; none changes."""
    dsn = pgvector_server.dsn
    _filled(dsn, schema, EncryptionCodec(KEY))
    before = _key_ids(dsn, schema)
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    with durable.postgres_world(dsn, schema=schema, codec=EncryptionCodec(KEY)):
        assert main(["rekey", "--dsn", dsn, "--schema", schema]) == 1
    err = capsys.readouterr().err
    assert "database session" in err and "pid " in err and "Stop every worker" in err
    assert _key_ids(dsn, schema) == before and _journal(dsn, schema) is None
    assert main(["rekey", "--dsn", dsn, "--schema", schema]) == 0  # once it is closed


def test_a_world_does_not_open_while_a_rekey_holds_it(pgvector_server: Server, schema: str) -> None:
    """The rekey's exclusive hold of the world's lock keeps every process from opening the world meanwhile."""
    import psycopg

    durable.postgres_world(pgvector_server.dsn, schema=schema).close()
    with psycopg.connect(pgvector_server.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (world_lock(schema),))
        with pytest.raises(durable.LogUnavailableError, match="rekey"):
            durable.postgres_world(pgvector_server.dsn, schema=schema)
    durable.postgres_world(pgvector_server.dsn, schema=schema).close()


def test_little_rekey_dsn_rekeys_the_schema_and_leaves_a_data_directory_alone(
    pgvector_server: Server, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --dsn, a ./.little-workflow beside it is not touched: the schema is what is rekeyed."""
    dsn = pgvector_server.dsn
    with durable.postgres_world(dsn, schema=schema, codec=EncryptionCodec(KEY)) as world:
        asyncio.run(durable.run_workflow(parked, "x", world=world, run_id="r"))
    monkeypatch.chdir(tmp_path)
    with durable.local_world(".little-workflow") as local:
        asyncio.run(durable.run_workflow(parked, "x", world=local, run_id="r"))
    before = {p: p.read_bytes() for p in Path(".little-workflow").rglob("*") if p.is_file()}
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    assert main(["rekey", "--dsn", dsn, "--schema", schema]) == 0
    assert {p: p.read_bytes() for p in Path(".little-workflow").rglob("*") if p.is_file()} == before
    assert {k for found in _key_ids(dsn, schema).values() for k in found} == {EncryptionCodec(NEW).key_id}
    with durable.postgres_world(dsn, schema=schema, codec=EncryptionCodec(NEW)) as world:
        assert asyncio.run(durable.handle("r", world=world).result()) == "x"


def test_the_rekey_knows_every_table_of_the_schema() -> None:
    """Each table the migrations create is rewritten by the rekey or named as holding no sealed value."""
    from durable.ops._rekey_postgres import CLEAR_TABLES
    from durable.store.postgres._migrations import OWN_TABLES

    rekeyed = {t.name for t in TABLES}
    assert not rekeyed & CLEAR_TABLES
    assert rekeyed | CLEAR_TABLES == OWN_TABLES
