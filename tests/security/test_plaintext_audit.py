"""Every table of a world, local and Postgres, holds no plaintext under a codec, and the audit covers each.

``fill`` writes a marked value into every place a world keeps one. In a
plain world each marker of a table's audited columns must show in that
column (so the audit reaches the table); in an encrypted world no marker
shows in any column of any table, nor in any file, and every value of an
audited column is a ciphertext. A table or a kind of document the audit
does not know fails both tests until it is given a marker here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import EncryptionCodec
from tests.helpers.audit_world import MARKS, fill
from tests.helpers.pg import Server, drop_schema, new_schema

pytest.importorskip("cryptography")

KEY = bytes(range(32))

M = MARKS
LOG = [
    *(M[k] for k in ("input", "output", "step", "tool_arg", "tool_result", "prompt", "response")),
    *(M[k] for k in ("step_error", "run_error", "blocked_error", "event", "stream", "artifact_name")),
    *(M[k] for k in ("outbox_arg", "message", "question", "answer", "child", "outer_loop", "waiting")),
]
"""What the event log holds of ``fill``'s values (a compacted run's snapshot is compressed: not found)."""

CONTROL = {
    "input": [M["input"], M["queued"], M["debounced"]],
    "blocked": [M["blocked_error"]],
}
TALK = {
    "messages": {"data": [M["message"], M["message_waiting"]]},
    "outbox": {"input": [M["outbox_arg"]], "result": [M["outbox_result"]], "error": [M["outbox_error"]]},
}

LOCAL_TABLES: dict[str, dict[str, dict[str, list[str]]]] = {
    "events.db": {
        "events": {"data": LOG},
        "runs": {},  # run ids, workflow names, statuses, times
        "meta": {},  # the key check (only under a codec)
        "sqlite_sequence": {},  # SQLite's counters
        **TALK,
    },
    "runtime.db": {
        "control": CONTROL,
        "schedules": {"input": [M["schedule"]]},
        "workers": {},  # the live workers' names, hosts and the hashes of their code
    },
    "threads.db": {
        "threads": {"value": [M["thread"]]},
        "sqlite_sequence": {},
    },
    "memory/memory.db": {
        "items": {"text": [M["memory_text"]], "metadata": [M["memory_meta"]]},
        "settings": {},  # the dimension, the metric, the key check
        "sqlite_sequence": {},
        **{t: {} for t in ("vectors", "vectors_info", "vectors_chunks", "vectors_rowids")},
        "vectors_vector_chunks00": {},  # embedding vectors: in the clear, as the security page says
    },
}
"""Every table of a data directory's databases: its audited columns and the markers each must show."""

PG_TABLES: dict[str, dict[str, list[str]]] = {
    "events": {"data": LOG},
    "control": CONTROL,
    "schedules": {"input": [M["schedule"]]},
    "artifacts": {"data": [M["artifact"], M["big_output"]], "manifest": [M["artifact_name"]]},
    "documents": {"value": [M["outer_loop"]]},
    "threads": {"value": [M["thread"]]},
    **TALK,
    "memory_items": {  # texts and metadata in the clear, or sealed: the other pair is empty
        "text": [M["memory_text"]],
        "metadata": [M["memory_meta"]],
        "sealed_text": [],
        "sealed_metadata": [],
    },  # and its embedding column: vectors in the clear, as the security page says
    "runs": {},  # run ids, workflow names, statuses, times, fencing tokens
    "leases": {},  # which process drives which run, until when
    "workers": {},  # the live workers' names, hosts and the hashes of their code
    "migrations": {},  # the names of the migrations applied
    "durable_meta": {},  # the application and the schema's version
}
"""Every table of a Postgres world's schema: its audited columns and the markers each must show."""

PG_DOCUMENTS = {"meta": [], "outer_loops": [M["outer_loop"]], "memory": []}
"""Every namespace of ``documents`` and the markers its values must show (``meta``: key checks;
``memory``: the memory store's dimension and metric)."""


def _sealed(value: Any) -> bool:
    """Whether a stored value is a ciphertext of the codec, or JSON whose only readable parts are names.

    ``None`` passes (a column left empty). A JSON object passes when every
    value that is not a short identifier is sealed (an artifact's stored
    manifest, a blocked run's reason beside its sealed error).
    """
    if value is None:
        return True
    if isinstance(value, bytes | memoryview):
        raw = bytes(value)
        if raw.startswith(b"enc1:"):  # a thread's value: the prefix, then the ciphertext
            raw = raw[5:]
        return len(raw) > 33 and raw[0] == 1
    text = str(value)
    if text.startswith(("enc1:", "sealed:")):
        return True
    try:
        data = json.loads(text)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    found = [v for v in data.values() if isinstance(v, str) and v.startswith(("enc1:", "sealed:"))]
    return bool(found)


def _missing_tables(found: set[str], known: dict[str, Any], where: str) -> list[str]:
    return [
        f"{where}: table {t!r} is not in the audit: make tests/helpers/audit_world.py write a marked "
        f"value into it (or say why it holds none) and list it in this module"
        for t in sorted(found - set(known))
    ]


# -- a data directory ------------------------------------------------------------------------


def _local_tables(root: Path) -> dict[str, set[str]]:
    out = {}
    for name in LOCAL_TABLES:
        db = sqlite3.connect(root / name)
        try:
            out[name] = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    return out


def _local_column(root: Path, db_name: str, table: str, column: str) -> list[Any]:
    db = sqlite3.connect(root / db_name)
    try:
        return [r[0] for r in db.execute(f'SELECT "{column}" FROM "{table}"')]
    finally:
        db.close()


def _as_text(value: Any) -> str:
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("latin-1")
    return str(value)


def _fill_local(root: Path, codec: EncryptionCodec | None) -> None:
    with durable.local_world(root, codec=codec, artifact_threshold=256) as world:
        out = fill(world, memory=True)
    assert out.startswith(M["output"]) and M["answer"] in out


def _local_files(root: Path) -> Iterator[tuple[str, bytes]]:
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_socket():
            yield str(p.relative_to(root)), p.read_bytes()


def test_the_audit_of_a_plain_data_directory_reaches_every_table(tmp_path: Path) -> None:
    """In a plain world each audited column shows its markers, and every table is known to the audit."""
    _fill_local(tmp_path, None)
    problems = []
    for db_name, tables in _local_tables(tmp_path).items():
        problems += _missing_tables(tables, LOCAL_TABLES[db_name], db_name)
        for table, columns in LOCAL_TABLES[db_name].items():
            for column, marks in columns.items():
                text = "\n".join(map(_as_text, _local_column(tmp_path, db_name, table, column)))
                problems += [f"{db_name} {table}.{column} lacks {m}" for m in marks if m not in text]
    files = dict(_local_files(tmp_path))
    for what, folder in (("artifact", "artifacts/"), ("outer_loop", "outer-loops/")):
        assert any(M[what].encode() in data for name, data in files.items() if name.startswith(folder))
    assert problems == []


def test_an_encrypted_data_directory_keeps_no_plaintext_in_any_table_or_file(tmp_path: Path) -> None:
    """Under a codec no marker shows in any file, and every value of an audited column is a ciphertext."""
    _fill_local(tmp_path, EncryptionCodec(KEY))
    leaks = [(name, m) for name, data in _local_files(tmp_path) for m in M.values() if m.encode() in data]
    assert leaks == []
    problems = []
    for db_name, tables in _local_tables(tmp_path).items():
        problems += _missing_tables(tables, LOCAL_TABLES[db_name], db_name)
        for table, columns in LOCAL_TABLES[db_name].items():
            for column in columns:
                values = _local_column(tmp_path, db_name, table, column)
                problems += [f"{db_name} {table}.{column}: {v!r:.80}" for v in values if not _sealed(v)]
    assert problems == []


# -- a Postgres schema -----------------------------------------------------------------------


@pytest.fixture
def schema(pgvector_server: Server) -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(pgvector_server.dsn, name)


def pg_columns(dsn: str, schema: str) -> dict[str, dict[str, list[Any]]]:
    """Every value of every column of every table of the schema, read through ``information_schema``."""
    import psycopg

    out: dict[str, dict[str, list[Any]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        cols = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (schema,),
        ).fetchall()
        for table, column, kind in cols:
            cast = "" if kind == "bytea" else "::text"
            query = f'SELECT "{column}"{cast} FROM "{schema}"."{table}"'
            out.setdefault(table, {})[column] = [r[0] for r in conn.execute(query)]  # type: ignore[call-overload]
    return out


def _fill_pg(dsn: str, schema: str, codec: EncryptionCodec | None) -> None:
    with durable.postgres_world(dsn, schema=schema, codec=codec, artifact_threshold=256) as world:
        out = fill(world, memory=True)
    assert out.startswith(M["output"]) and M["answer"] in out


def _documents(columns: dict[str, dict[str, list[Any]]]) -> list[tuple[str, str]]:
    docs = columns["documents"]
    return list(zip(docs["namespace"], docs["value"], strict=True))


def test_the_audit_of_a_plain_postgres_schema_reaches_every_table(
    pgvector_server: Server, schema: str
) -> None:
    """In a plain schema each audited column shows its markers; every table and namespace is known."""
    _fill_pg(pgvector_server.dsn, schema, None)
    columns = pg_columns(pgvector_server.dsn, schema)
    problems = _missing_tables(set(columns), PG_TABLES, f"schema {schema}")
    for table, audited in PG_TABLES.items():
        for column, marks in audited.items():
            text = "\n".join(map(_as_text, columns[table][column]))
            problems += [f"{table}.{column} lacks {m}" for m in marks if m not in text]
    docs = _documents(columns)
    problems += [f"documents: namespace {ns!r} is not audited" for ns, _ in docs if ns not in PG_DOCUMENTS]
    for ns, marks in PG_DOCUMENTS.items():
        text = "\n".join(v for n, v in docs if n == ns)
        problems += [f"documents {ns!r} lacks {m}" for m in marks if m not in text]
    assert problems == []


def test_an_encrypted_postgres_schema_keeps_no_plaintext_in_any_column(
    pgvector_server: Server, schema: str
) -> None:
    """Under a codec no marker shows in any column of any table; audited columns hold ciphertexts only."""
    _fill_pg(pgvector_server.dsn, schema, EncryptionCodec(KEY))
    columns = pg_columns(pgvector_server.dsn, schema)
    leaks = [
        (table, column, m)
        for table, cols in columns.items()
        for column, values in cols.items()
        for m in M.values()
        if m in "\n".join(map(_as_text, values))
    ]
    assert leaks == []
    docs = _documents(columns)
    columns["documents"]["value"] = [v for ns, v in docs if ns not in ("meta", "memory")]  # no secret
    problems = _missing_tables(set(columns), PG_TABLES, f"schema {schema}")
    for table, audited in PG_TABLES.items():
        for column in audited:
            problems += [f"{table}.{column}: {v!r:.80}" for v in columns[table][column] if not _sealed(v)]
    problems += [f"documents: namespace {ns!r} is not audited" for ns, _ in docs if ns not in PG_DOCUMENTS]
    assert problems == []
