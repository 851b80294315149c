"""``little rekey``: re-encrypt a data directory under a new key (or encrypt or decrypt it).

Every row of ``events.db``, with its messages and outbox entries,
is rewritten in one transaction, then the file is vacuumed and its WAL
truncated so that no page keeps an old payload. Every artifact and
outer-loop manifest is rewritten under the new key (a new file
first, the old one removed after), and every memory item's text and metadata
in ``memory/memory.db`` (one transaction, then a vacuum), and the queued
and schedule inputs of ``runtime.db`` (the same). Run it while no process
uses the data directory.

A journal, ``rekey-journal.json`` in the data directory, names the key the
directory is leaving and the target key, and each part once it is done
(written atomically after the part); a rekey stopped at any point (even by
SIGKILL) is finished by running it again with the same target. Each item of a
part says by its own form whether it was rewritten yet (an artifact or
outer-loop manifest is in the clear or names its key; a part in one
transaction is all old or all new), so a rerun opens whichever form it finds.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import CodecError, ConfigurationError
from ..security import Codec, list_folder, read_file, refuse_linked_database, remove_file, write_file
from ..store import (
    META_KEY,
    PREFIX,
    EncryptedArtifacts,
    EncryptedLog,
    FileArtifacts,
    SqliteLog,
    key_check,
    open_manifest,
    recorded_key_id,
    rekey_talk,
    sha256_of,
    verify_key_check,
)

OUTER_FOLDER = "outer-loops"
"""The outer loops' folder of a data directory (named by ``durable.outer``, a layer above)."""


def rekey(data_dir: str | Path, new: Codec | None, old: Codec | None) -> dict[str, Any]:
    """Rewrite every payload of ``data_dir`` under ``new`` (``None``: in the clear).

    Args:
        data_dir: The data directory.
        new: The codec to encrypt under from now on; ``None`` decrypts the directory.
        old: A codec holding the key the directory is encrypted under now
            (``None`` for a directory that is not encrypted).

    Returns:
        What was rewritten: ``{"from_key_id", "to_key_id", "events", "artifacts", "outer_loops",
        "memory_items", "messages", "runtime_inputs", "thread_values"}`` (``messages``: messages
        and outbox entries; ``runtime_inputs``: queued inputs and schedule inputs of ``runtime.db``;
        ``thread_values``: the values of ``threads.db``, conversation sessions' items).

    Raises:
        KeyMismatchError: ``old`` does not hold the directory's key.
        CodecError: A payload does not decrypt; nothing of the log was changed then.
        ConfigurationError: A stopped rekey of the directory went to another key: it
            must be finished first (its journal names the key).
    """
    root = Path(data_dir)
    for rel, name in (((), "events.db"), ((), "runtime.db"), ((), "threads.db"), (("memory",), "memory.db")):
        refuse_linked_database(root, rel, name)
    target = None if new is None else new.key_id
    # A part already rewritten by a stopped rekey is under the new key: the new codec reads it too.
    reading = old if old is not None else new
    _check_memory_key(root, reading)  # before anything is rewritten
    log = SqliteLog(root / "events.db")
    try:
        was = recorded_key_id(log)
        if was is not None and reading is None:
            raise ConfigurationError(
                f"the data directory is encrypted under key id {was}: give that key to read it "
                "(in LITTLE_OLD_KEYS or as the key itself)."
            )
        journal = _Journal.resume(root, was, target)
        done: dict[str, int] = dict(journal.done)
        if "events" not in done:
            reader = EncryptedLog(log, reading) if was is not None and reading is not None else None
            try:
                done["events"], done["messages"] = _rewrite_rows(log, reader, new)
            except BaseException:
                if not journal.done:  # nothing was rewritten (one transaction): nothing to finish
                    journal.close()
                raise
            _vacuum(log)
            journal.finish(events=done["events"], messages=done["messages"])
    finally:
        log.close()
    parts: dict[str, Callable[[Path, Codec | None, Codec | None], int]] = {
        "artifacts": _rewrite_artifacts,
        "outer_loops": _rewrite_outer,
        "memory_items": _rewrite_memory,
        "runtime_inputs": _rewrite_runtime,
        "thread_values": _rewrite_threads,
    }
    for name, part in parts.items():
        if name not in done:
            done[name] = part(root, reading, new)
            journal.finish(**{name: done[name]})
    journal.close()
    return {"from_key_id": journal.from_key_id, "to_key_id": target, **done}


def refuse_other_target(stopped: str | None, target: str | None, where: str) -> None:
    """Refuse a rekey towards ``target`` while one towards ``stopped`` is not finished.

    Raises:
        ConfigurationError: The targets differ; the message names the key id that finishes it.
    """
    if stopped != target:
        to = stopped or "(none: --decrypt)"
        raise ConfigurationError(
            f"a rekey of {where} to key id {to} was stopped before it finished: run `little rekey` "
            "again with that key in LITTLE_KEY (and --decrypt if it was a decrypt) to finish it first."
        )


class _Journal:
    """What a rekey has done so far, in ``rekey-journal.json`` (removed once the rekey is complete)."""

    NAME = "rekey-journal.json"

    def __init__(self, path: Path, from_key_id: str | None, to_key_id: str | None, done: dict[str, int]):
        self.path = path
        self.from_key_id = from_key_id
        self.to_key_id = to_key_id
        self.done = done

    @classmethod
    def resume(cls, root: Path, was: str | None, target: str | None) -> _Journal:
        """The journal of a stopped rekey to ``target``, or a new one (``was``: the log's key id now).

        Raises:
            ConfigurationError: A stopped rekey went to another target; or its journal is damaged.
        """
        path = root / cls.NAME
        text = read_file(root, (), cls.NAME)
        if text is None:
            journal = cls(path, was, target, {})
            journal._write()
            return journal
        try:
            stored = json.loads(text)
            journal = cls(path, stored["from_key_id"], stored["to_key_id"], dict(stored["done"]))
        except (ValueError, KeyError, TypeError):
            raise ConfigurationError(
                f"the rekey journal {str(path)!r} is damaged. Run the rekey again from the key of "
                "each part (LITTLE_OLD_KEYS can hold both) after removing the journal."
            ) from None
        refuse_other_target(journal.to_key_id, target, "this data directory")
        return journal

    def finish(self, **counts: int) -> None:
        """Record parts as done (the file replaced atomically, so a kill leaves the old or the new)."""
        self.done.update(counts)
        self._write()

    def _write(self) -> None:
        body = {"from_key_id": self.from_key_id, "to_key_id": self.to_key_id, "done": self.done}
        write_file(self.path.parent, (), self.NAME, json.dumps(body).encode(), fsync=True)

    def close(self) -> None:
        """The rekey is complete: the journal goes."""
        remove_file(self.path.parent, (), self.NAME)


def _check_memory_key(root: Path, old: Codec | None) -> None:
    """Refuse, before anything is rewritten, a memory store whose key ``old`` does not hold."""
    path = root / "memory" / "memory.db"
    if not path.is_file():
        return
    from ..memory import VecDb, recorded_check, stored_key_id

    db = VecDb(path)
    try:
        kid, text = stored_key_id(db), recorded_check(db)
    finally:
        db.close()
    if text is None:
        return
    if old is None:
        raise ConfigurationError(
            f"the memory store is encrypted under key id {kid}: give that key to read it "
            "(in LITTLE_OLD_KEYS or as the key itself)."
        )
    verify_key_check(text, old, f"the memory store {str(path)!r}")


def _rewrite_memory(root: Path, old: Codec | None, new: Codec | None) -> int:
    """Rewrite the memory store's items, then vacuum it so that no page keeps an old payload."""
    path = root / "memory" / "memory.db"
    if not path.is_file():
        return 0
    from ..memory import (
        VecDb,  # the memory extra is needed only for a directory with a store
        rekey_items,
    )

    db = VecDb(path)
    try:
        n = rekey_items(db, old, new)
        db.run("PRAGMA wal_checkpoint(TRUNCATE)")
        db.run("VACUUM")
        db.run("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return n


def _rewrite_rows(log: SqliteLog, reader: EncryptedLog | None, new: Codec | None) -> tuple[int, int]:
    """Rewrite every row, message and outbox entry of the log in one transaction.

    Returns:
        How many rows, and how many messages and outbox entries, were rewritten.
    """
    db = log._db
    sealer = _Sealer(new) if new is not None else None
    n = 0
    with log._lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute("SELECT run_id, seq, type, data FROM events").fetchall()
            for run_id, seq, type_, data in rows:
                row = (seq, type_, data)
                if reader is not None:
                    row = reader.open(run_id, row)
                if sealer is not None:
                    row = sealer.seal(run_id, row)
                db.execute("UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (row[2], run_id, seq))
                n += 1
            talk = rekey_talk(db, reader.codec if reader is not None else None, new)
            db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            if new is None:
                db.execute("DELETE FROM meta WHERE name = ?", (META_KEY,))
            else:
                db.execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (META_KEY, key_check(new))
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return n, talk


def _vacuum(log: SqliteLog) -> None:
    """Vacuum the log so that no free page keeps an old payload, and truncate its WAL."""
    try:
        log.vacuum()
    except sqlite3.Error as exc:  # pragma: no cover - a vacuum needs free disk space
        raise ConfigurationError(
            f"the rows were rewritten but VACUUM failed ({exc}); free some disk space and run "
            "`little rekey` again to finish"
        ) from exc


class _Sealer(EncryptedLog):
    """``EncryptedLog.seal`` without a log under it (rekey writes the rows itself)."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.binary = True
        self._blob = bytearray  # rekey binds the rows to sqlite3 itself, as a SqliteLog does


@contextmanager
def _rewritten(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the SQLite file ``path`` inside one write transaction, committed and vacuumed after.

    The file was checked for links before. A failure rolls the transaction back; after the
    commit the file is rewritten (``VACUUM``) so that no free page keeps an old value.
    """
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def _rewrite_runtime(root: Path, old: Codec | None, new: Codec | None) -> int:
    """Rewrite the queued inputs, blocked runs' errors and schedule inputs of ``runtime.db``, then vacuum it.

    One transaction: the file holds them all in one form, old or new.
    """
    path = root / "runtime.db"
    if not path.is_file():
        return 0
    from ..security import input_binding, open_control, seal_control
    from ..store import open_text, schedule_ad, seal_text

    def reseal(field: str, binding: str, text: str, what: str) -> str:
        return seal_control(new, field, binding, open_control(old, field, binding, text, what))

    n = 0
    with _rewritten(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "control" in tables:
            have = {r[1] for r in db.execute("PRAGMA table_info(control)")}  # an older file lacks some
            cols = [c if c in have else "NULL" for c in ("queue", "debounce_key", "input", "blocked")]
            rows = db.execute(f"SELECT run_id, {', '.join(cols)} FROM control").fetchall()
            for run_id, queue, debounce_key, text, blocked in rows:
                binding = input_binding(run_id, queue, debounce_key)
                text = reseal("input", binding, text, f"the queued input of run {run_id!r}")
                why = json.loads(blocked) if blocked else None
                if isinstance(why, dict) and isinstance(why.get("error_message"), str):
                    what = f"the error of blocked run {run_id!r}"
                    why["error_message"] = reseal("error", run_id, why["error_message"], what)
                    blocked = json.dumps(why)
                db.execute("UPDATE control SET input = ? WHERE run_id = ?", (text, run_id))
                if blocked is not None:
                    db.execute("UPDATE control SET blocked = ? WHERE run_id = ?", (blocked, run_id))
                n += 1
        if "schedules" in tables:
            for name, text in db.execute("SELECT name, input FROM schedules").fetchall():
                ad, what = schedule_ad(name), f"the input of schedule {name!r}"
                sealed = old is not None and text.startswith(PREFIX)  # one transaction: all one form
                plain = open_text(old, text, ad, what, None) if old is not None and sealed else text
                sealed = seal_text(new, plain, ad) if new is not None else plain
                db.execute("UPDATE schedules SET input = ? WHERE name = ?", (sealed, name))
                n += 1
    return n


def _rewrite_threads(root: Path, old: Codec | None, new: Codec | None) -> int:
    """Rewrite every value of ``threads.db`` in one transaction, then vacuum it."""
    path = root / "threads.db"
    if not path.is_file():
        return 0
    from ..store import open_thread_value, seal_thread_value

    n = 0
    with _rewritten(path) as db:
        rows = db.execute("SELECT seq, namespace, thread, key, value FROM threads").fetchall()
        for seq, ns, thread, key, value in rows:
            stored = bytes(value)
            sealed = old is not None and stored.startswith(PREFIX.encode())  # one transaction: one form
            plain = open_thread_value(old, ns, thread, key, stored) if old and sealed else stored
            again = seal_thread_value(new, ns, thread, key, plain) if new is not None else plain
            db.execute("UPDATE threads SET value = ? WHERE seq = ?", (again, seq))
            n += 1
    return n


def _rewrite_artifacts(root: Path, old: Codec | None, new: Codec | None) -> int:
    plain = FileArtifacts(root)
    reading: Any = EncryptedArtifacts(plain, old) if old is not None else plain
    writing: Any = EncryptedArtifacts(plain, new) if new is not None else plain
    n = 0
    plain.remove_leftovers()  # the writes a stopped rekey did not finish
    for digest, text in plain.manifests():
        stored = json.loads(text)
        sealed = isinstance(stored.get("manifest"), str)  # a stopped rekey leaves both forms
        if sealed and old is None:
            raise CodecError(f"artifact file {digest} is encrypted: give its key; rekey stopped")
        manifest = open_manifest(old, stored, digest) if sealed and old is not None else stored
        sha = manifest["sha256"]
        data = (reading if sealed else plain).get(sha)
        if data is None or sha256_of(data) != sha:
            raise CodecError(
                f"artifact {manifest.get('name')!r} ({sha}) is missing or damaged; rekey stopped"
            )
        manifest.pop("path", None)
        if new is not None:
            writing.write(data, manifest)
        else:
            writing.put(data, manifest)
        new_name = sha.partition(":")[2] if new is None else new.digests(sha.encode())[0]
        if new_name != digest:  # the new copy has another name: the old one goes
            plain.remove(digest)
        n += 1
    return n


def _rewrite_outer(root: Path, old: Codec | None, new: Codec | None) -> int:
    n = 0
    for name in list_folder(root, (OUTER_FOLDER,)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        ad = f"outer-loop|{name[: -len('.json')]}".encode()
        raw = read_file(root, (OUTER_FOLDER,), name)
        if raw is None:
            continue
        text = raw.decode("utf-8")
        if text.startswith(PREFIX):  # a stopped rekey leaves manifests of both forms
            if old is None:
                raise CodecError(f"the outer-loop manifest {name!r} is encrypted: give its key; stopped")
            text = old.decrypt(base64.b64decode(text[len(PREFIX) :], validate=True), ad).decode()
        if new is not None:
            text = PREFIX + base64.b64encode(new.encrypt(text.encode(), ad)).decode("ascii")
        write_file(root, (OUTER_FOLDER,), name, text.encode("utf-8"))
        n += 1
    return n
