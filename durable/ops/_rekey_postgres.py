"""``little rekey --dsn``: re-encrypt a Postgres world's schema under a new key (or encrypt or decrypt it).

Every sealed value of every table is rewritten under the new key: event
payloads, messages, outbox entries' arguments, results and errors, queued
inputs and blocked runs' errors, schedule inputs, outer-loop manifests, the
thread store's values, artifacts (payload, manifest, and the keyed name of
the row) and memory items' texts and metadata. A table is
rewritten in batches of ``batch`` rows in primary-key order, each batch one
transaction that also moves the journal, so a rekey stopped at any point
(Ctrl-C, a lost connection, SIGKILL) has committed whole batches and says
where it stopped. Then every table is rewritten on disk (``VACUUM FULL``),
so that no dead row keeps an old payload, and the last transaction records
the new key check and removes the journal.

The journal is a row of the schema (``documents``, namespace ``meta``, key
``rekey``): the key the schema is leaving, the key it goes to, the tables
done, the cursor of the table in progress. A rerun with the same target
goes on from the cursor; a rerun towards another target is refused with the
key id that finishes the stopped one. While the journal is there no world
opens on the schema, with the message that says how to finish.

The rekey runs only when no process has the world open: every session of a
world holds the world's advisory lock shared (``world_lock``), the rekey
takes it exclusively for its whole run, or refuses naming the sessions that
hold it; and a world does not open while the rekey holds it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import CodecError, ConfigurationError, LogFormatError
from ..memory import resealed
from ..security import Codec, input_binding, open_control, seal_control
from ..store import (
    META_KEY,
    PREFIX,
    REKEY_JOURNAL,
    EncryptedArtifacts,
    check_schema_name,
    describe_dsn,
    key_check,
    message_ad,
    open_manifest,
    open_text,
    open_thread_value,
    outbox_ad,
    quote,
    recognise_world,
    row_ad,
    schedule_ad,
    seal_text,
    seal_thread_value,
    sha256_of,
    verify_key_check,
    world_lock,
)
from ._rekey import refuse_other_target

if TYPE_CHECKING:
    from psycopg import Connection

BATCH = 500
"""Rows rewritten in one transaction."""


class _Keys:
    """The codec that reads (old, or new for a part a stopped rekey rewrote) and the one that writes."""

    def __init__(self, reading: Codec | None, new: Codec | None):
        self.reading = reading
        self.new = new

    def text(self, value: str | None, ad: bytes, what: str, run_id: str | None = None) -> str | None:
        """An ``enc1:`` text, or a plain one, rewritten in the target's form (``None`` stays ``None``)."""
        if value is None:
            return None
        plain = value
        if value.startswith(PREFIX):
            if self.reading is None:
                raise CodecError(f"{what} is encrypted: give its key (in LITTLE_OLD_KEYS); rekey stopped")
            plain = open_text(self.reading, value, ad, what, run_id)
        return plain if self.new is None else seal_text(self.new, plain, ad)

    def control(self, value: str | None, field: str, binding: str, what: str) -> str | None:
        """A ``sealed:`` text of the control table, or a plain one, in the target's form."""
        if value is None:
            return None
        return seal_control(self.new, field, binding, open_control(self.reading, field, binding, value, what))


def _events(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    run_id, seq, type_, data = row
    return {"data": k.text(data, row_ad(run_id, seq, type_), f"run {run_id!r}: event {seq}", run_id)}


def _messages(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    _, run_id, topic, message_id, data = row
    what = f"message {message_id!r} to run {run_id!r}"
    return {"data": k.text(data, message_ad(run_id, topic, message_id), what, run_id)}


def _outbox(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    key, run_id, *fields = row
    return {
        f: k.text(text, outbox_ad(key, f), f"the {f} of outbox entry {key!r}", run_id)
        for f, text in zip(("input", "result", "error"), fields, strict=True)
    }


def _control(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    run_id, queue, debounce_key, input_, blocked = row
    binding = input_binding(run_id, queue, debounce_key)
    out = {"input": k.control(input_, "input", binding, f"the queued input of run {run_id!r}")}
    why = json.loads(blocked) if blocked else None
    if isinstance(why, dict) and isinstance(why.get("error_message"), str):
        message = why["error_message"]
        why["error_message"] = k.control(message, "error", run_id, f"the error of blocked run {run_id!r}")
        out["blocked"] = json.dumps(why)
    return out


def _memory_items(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    return resealed(k.reading, k.new, row, "the memory store")


def _schedules(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    name, input_ = row
    return {"input": k.text(input_, schedule_ad(name), f"the input of schedule {name!r}")}


def _threads(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    _, namespace, thread, key, value = row
    stored = bytes(value)
    plain = stored
    if stored.startswith(PREFIX.encode()):
        if k.reading is None:
            what = f"the value {key!r} of thread {thread!r}"
            raise CodecError(f"{what} is encrypted: give its key; rekey stopped")
        plain = open_thread_value(k.reading, namespace, thread, key, stored)
    return {"value": plain if k.new is None else seal_thread_value(k.new, namespace, thread, key, plain)}


def _documents(k: _Keys, row: Sequence[Any]) -> dict[str, Any]:
    namespace, key, value = row
    if namespace in ("meta", "memory"):  # the key check and this journal; the memory's dimension
        return {}
    if namespace != "outer_loops":
        raise LogFormatError(
            f"the documents of the schema hold a kind this durable cannot rekey ({namespace!r}); "
            "upgrade little-workflow and run the rekey again."
        )
    return {"value": k.text(value, f"outer-loop|{key}".encode(), f"the outer-loop manifest {key!r}")}


def _artifact(conn: Connection[Any], s: str, keys: _Keys, row: Sequence[Any]) -> int:
    """Rewrite one artifact row in the target's form: its name (a keyed hash) may change, so it is replaced.

    Returns 0 for a row already in the target's form under its name (a row
    this rekey wrote, found again past the cursor), else 1.
    """
    tag, data, manifest_text = row[0], bytes(row[1]), row[2]
    stored = json.loads(manifest_text)
    sealed = isinstance(stored.get("manifest"), str)
    if sealed:
        if keys.reading is None:
            raise CodecError(f"artifact row {tag} is encrypted: give its key; rekey stopped")
        digest = tag.partition(":")[2]
        manifest = open_manifest(keys.reading, stored, digest)
        plain = keys.reading.decrypt(data, b"artifact|" + manifest["sha256"].encode())
    else:
        manifest, plain = stored, data
    sha = manifest["sha256"]
    if sha256_of(plain) != sha:
        raise CodecError(f"artifact {manifest.get('name')!r} ({sha}) is damaged; rekey stopped")
    if keys.new is None:
        if not sealed:
            return 0
        new_data, new_manifest = plain, manifest
    else:
        if sealed and stored.get("key_id") == keys.new.key_id:
            return 0
        new_data, new_manifest = EncryptedArtifacts(_Nowhere(), keys.new).sealed(plain, manifest)
    new_tag = new_manifest["sha256"]
    conn.execute(
        f"INSERT INTO {s}.artifacts (sha256, data, manifest) VALUES (%s, %s, %s) "
        "ON CONFLICT (sha256) DO UPDATE SET data = excluded.data, manifest = excluded.manifest",
        (new_tag, new_data, json.dumps(new_manifest, sort_keys=True)),
    )
    if new_tag != tag:
        conn.execute(f"DELETE FROM {s}.artifacts WHERE sha256 = %s", (tag,))
    return 1


class _Nowhere:
    """An artifact store that stores nothing: ``EncryptedArtifacts.sealed`` needs none."""

    def put(self, data: bytes, manifest: dict[str, Any]) -> str | None:
        raise AssertionError("the rekey writes artifact rows itself")

    def get(self, sha256: str) -> bytes | None:
        return None

    def delete(self, sha256: str) -> None:
        return None

    def resolve(self, location: str | None) -> None:
        return None


@dataclass(frozen=True)
class _Table:
    """A table with sealed values: its primary key (the batches' order), the columns read, the rewrite.

    ``rewrite`` gives the new values of a row's sealed columns; ``replace``
    instead writes the row itself, for a table whose key changes with the key
    (an artifact is named by a keyed hash) and returns how many rows it rewrote.
    """

    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    rewrite: Callable[[_Keys, Sequence[Any]], dict[str, Any]] | None = None
    replace: Callable[[Connection[Any], str, _Keys, Sequence[Any]], int] | None = None


TABLES = (
    _Table("events", ("run_id", "seq"), ("run_id", "seq", "type", "data"), _events),
    _Table("messages", ("id",), ("id", "run_id", "topic", "message_id", "data"), _messages),
    _Table("outbox", ("key",), ("key", "run_id", "input", "result", "error"), _outbox),
    _Table("control", ("run_id",), ("run_id", "queue", "debounce_key", "input", "blocked"), _control),
    _Table("schedules", ("name",), ("name", "input"), _schedules),
    _Table("documents", ("namespace", "key"), ("namespace", "key", "value"), _documents),
    _Table("threads", ("seq",), ("seq", "namespace", "thread", "key", "value"), _threads),
    _Table("artifacts", ("sha256",), ("sha256", "data", "manifest"), replace=_artifact),
    _Table(
        "memory_items",
        ("id",),
        ("id", "ns", "key", "text", "metadata", "sealed_text", "sealed_metadata"),
        _memory_items,
    ),
)
"""Every table that holds sealed values, in the order the rekey rewrites them."""

CLEAR_TABLES = frozenset({"runs", "leases", "migrations", "durable_meta", "workers"})
"""The tables that hold no sealed value: ids, names, states, times, fencing tokens, the schema's
version, the live workers and the hashes of their code."""


def rekey_postgres(
    dsn: str, new: Codec | None, old: Codec | None, *, schema: str = "durable", batch: int = BATCH
) -> dict[str, Any]:
    """Rewrite every sealed value of a Postgres world's schema under ``new`` (``None``: in the clear).

    Args:
        dsn: The PostgreSQL DSN of the world.
        new: The codec to encrypt under from now on; ``None`` decrypts the schema.
        old: A codec holding the key the schema is encrypted under now (``None`` for a
            schema that is not encrypted).
        schema: The world's schema.
        batch: Rows rewritten in one transaction.

    Returns:
        What was rewritten: ``{"from_key_id", "to_key_id", "events", "artifacts",
        "outer_loops", "memory_items", "messages", "runtime_inputs", "thread_values"}``
        (``messages``: messages and outbox entries; ``runtime_inputs``: the control table's
        records and the schedules; ``thread_values``: the thread store's values).

    Raises:
        ConfigurationError: A process has the world open; or a stopped rekey of the schema
            went to another key; or there is no durable world in the schema.
        KeyMismatchError: ``old`` does not hold the schema's key.
        CodecError: A value does not decrypt; the batch it is in was not changed.
        LogFormatError: The schema was migrated by another version of durable.
    """
    import psycopg

    check_schema_name(schema)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigurationError(f"batch must be a whole number >= 1, not {batch!r}.")
    where = f"the PostgreSQL schema {schema!r} at {describe_dsn(dsn)}"
    target = None if new is None else new.key_id
    reading = old if old is not None else new
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = quote(schema)
        recognise_world(conn, schema, where)
        _lock_world(conn, schema, where)
        kid, check = _meta(conn, s, META_KEY)
        if kid is not None and reading is None:
            raise ConfigurationError(
                f"{where} is encrypted under key id {kid}: give that key to read it "
                "(in LITTLE_OLD_KEYS or as the key itself)."
            )
        if check is not None and reading is not None:
            verify_key_check(check, reading, where)
        journal = _Journal.resume(conn, s, where, kid, target)
        keys = _Keys(reading, new)
        for table in TABLES:
            if table.name not in journal.done:
                _rewrite(conn, s, table, keys, journal, batch)
        if not journal.vacuumed:
            for table in TABLES:  # no dead row keeps an old payload
                conn.execute(f"VACUUM FULL {s}.{quote(table.name)}")
            journal.vacuumed = True
            journal.save(conn)
        with conn.transaction():
            if new is None:
                conn.execute(
                    f"DELETE FROM {s}.documents WHERE namespace = 'meta' AND key = %s",
                    (META_KEY,),
                )
            else:
                _set_meta(conn, s, META_KEY, key_check(new))
            conn.execute(
                f"DELETE FROM {s}.documents WHERE namespace = 'meta' AND key = %s",
                (REKEY_JOURNAL,),
            )
        conn.execute(f"VACUUM FULL {s}.documents")  # the old key check
    done = journal.done
    return {
        "from_key_id": journal.from_key_id,
        "to_key_id": target,
        "events": done["events"],
        "artifacts": done["artifacts"],
        "outer_loops": done["documents"],
        "memory_items": done["memory_items"],
        "messages": done["messages"] + done["outbox"],
        "runtime_inputs": done["control"] + done["schedules"],
        "thread_values": done["threads"],
    }


def _lock_world(conn: Connection[Any], schema: str, where: str) -> None:
    """Take the world's lock alone for this session, or refuse, naming the sessions that hold it."""
    lock = world_lock(schema)
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
    if row is not None and row[0]:
        return
    holders = conn.execute(
        "SELECT a.pid, COALESCE(a.client_addr::text, 'local'), COALESCE(a.application_name, '') "
        "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database "
        "WHERE datname = current_database()) AND l.classid = %s AND l.objid = %s AND l.objsubid = 1 "
        "AND l.pid <> pg_backend_pid() ORDER BY a.pid",
        (lock >> 32, lock & 0xFFFFFFFF),
    ).fetchall()
    shown = ", ".join(f"pid {pid} from {addr}" for pid, addr, _ in holders[:5]) or "sessions"
    raise ConfigurationError(
        f"{where} is open in {len(holders) or 'other'} database session(s) ({shown}): a rekey runs "
        "only when no process uses the world. Stop every worker, `little ui` and program that opened "
        "it, then run `little rekey` again. Nothing was changed."
    )


def _meta(conn: Connection[Any], s: str, name: str) -> tuple[str | None, str | None]:
    """The key id and the text of a ``meta`` document (``(None, None)`` when it is not there)."""
    row = conn.execute(
        f"SELECT value FROM {s}.documents WHERE namespace = 'meta' AND key = %s",
        (name,),
    ).fetchone()
    if row is None:
        return None, None
    try:
        kid = str(json.loads(row[0])["key_id"])
    except (ValueError, KeyError, TypeError):
        kid = "(unreadable)"
    return kid, str(row[0])


def _set_meta(conn: Connection[Any], s: str, name: str, value: str) -> None:
    conn.execute(
        f"INSERT INTO {s}.documents (namespace, key, value) VALUES ('meta', %s, %s) "
        "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
        (name, value),
    )


class _Journal:
    """What a rekey of the schema has done so far: a ``meta`` document, moved in each batch's transaction."""

    def __init__(self, s: str, body: dict[str, Any]):
        self.s = s
        self.from_key_id: str | None = body["from_key_id"]
        self.to_key_id: str | None = body["to_key_id"]
        self.done: dict[str, int] = dict(body.get("done", {}))
        self.table: str | None = body.get("table")
        self.cursor: list[Any] | None = body.get("cursor")
        self.count: int = int(body.get("count", 0))
        self.batches: int = int(body.get("batches", 0))
        self.vacuumed: bool = bool(body.get("vacuumed", False))

    @classmethod
    def resume(
        cls, conn: Connection[Any], s: str, where: str, was: str | None, target: str | None
    ) -> _Journal:
        """The journal of a stopped rekey to ``target``, or a new one (``was``: the schema's key id now).

        Raises:
            ConfigurationError: A stopped rekey went to another target; or its journal is damaged.
        """
        _, text = _meta(conn, s, REKEY_JOURNAL)
        if text is None:
            journal = cls(s, {"from_key_id": was, "to_key_id": target})
            journal.save(conn)
            return journal
        try:
            journal = cls(s, json.loads(text))
        except (ValueError, KeyError, TypeError):
            raise ConfigurationError(
                f"the rekey journal of {where} (documents, meta, {REKEY_JOURNAL!r}) is damaged. "
                "Delete that row and run the rekey again from the key of each value (LITTLE_OLD_KEYS "
                "can hold both)."
            ) from None
        refuse_other_target(journal.to_key_id, target, where)
        return journal

    def save(self, conn: Connection[Any]) -> None:
        body = {
            "from_key_id": self.from_key_id,
            "to_key_id": self.to_key_id,
            "done": self.done,
            "table": self.table,
            "cursor": self.cursor,
            "count": self.count,
            "batches": self.batches,
            "vacuumed": self.vacuumed,
        }
        _set_meta(conn, self.s, REKEY_JOURNAL, json.dumps(body))


def _rewrite(
    conn: Connection[Any], s: str, table: _Table, keys: _Keys, journal: _Journal, batch: int
) -> None:
    """Rewrite ``table`` batch by batch from the journal's cursor; each batch commits with the journal."""
    if journal.table != table.name:
        journal.table, journal.cursor, journal.count = table.name, None, 0
    t = f"{s}.{quote(table.name)}"
    order = ", ".join(table.key)
    select = f"SELECT {', '.join(table.columns)} FROM {t} "
    after = f"WHERE ({order}) > ({', '.join(['%s'] * len(table.key))}) "
    tail = f"ORDER BY {order} LIMIT %s FOR UPDATE"
    while True:
        with conn.transaction():
            cursor = journal.cursor
            query = select + (after if cursor is not None else "") + tail
            rows = conn.execute(query, (*(cursor or ()), batch)).fetchall()
            for row in rows:
                if table.replace is not None:
                    journal.count += table.replace(conn, s, keys, row)
                    continue
                assert table.rewrite is not None
                changes = table.rewrite(keys, row)
                if changes:
                    sets = ", ".join(f"{c} = %s" for c in changes)
                    match = " AND ".join(f"{c} = %s" for c in table.key)
                    conn.execute(
                        f"UPDATE {t} SET {sets} WHERE {match}",
                        (*changes.values(), *row[: len(table.key)]),
                    )
                    journal.count += 1
            journal.batches += 1
            if rows:
                journal.cursor = list(rows[-1][: len(table.key)])
            if len(rows) < batch:
                journal.done[table.name] = journal.count
            journal.save(conn)
        if table.name in journal.done:
            return
