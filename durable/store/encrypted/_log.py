"""``EncryptedLog``: any log, with every row's payload encrypted by a codec.

The wrapper sits at the store boundary: the engine writes and reads plain
JSON rows, the backend stores the ciphertext in their place: as bytes for a
backend that says it stores them (``stores_bytes``: ``SqliteLog`` keeps a
BLOB in the row's column, ``MemoryLog`` the bytes), as ``enc1:<base64>``
text for any other. Each
payload is bound to its run id, seq and event type as associated data, so
a ciphertext copied to another row, another seq or another run does not
decrypt. What stays in the clear: run ids, seqs, event types, workflow
names, statuses and times (the run summary).

The log records a key check (the key id and an AEAD tag over a constant)
the first time it is opened with a codec; a later open with another key, or
without one, is refused before anything is read or written.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from ...errors import ArtifactIntegrityError, CodecError, ConfigurationError, KeyMismatchError
from ...security import Codec
from ..artifacts._protocol import ArtifactStore
from ..log._protocol import Append, EventLog, Row, RunInfo, append_one_by_one, row_times
from ..log._sqlite import SqliteLog
from ..messages._protocol import MessageStore
from ..outbox._protocol import OutboxStore
from ._messages import EncryptedMessages, EncryptedOutbox

PREFIX = "enc1:"
"""What every encrypted payload starts with."""
META_KEY = "codec"
"""The name of the key check in the log's meta facts."""
_CHECK = b"durable key check"
_new_tuple = tuple.__new__  # an ``Append`` without the Python-level ``__new__`` of a named tuple


class MetaLog(EventLog, Protocol):
    """A log that also keeps facts about itself (``SqliteLog``, ``MemoryLog``)."""

    def get_meta(self, name: str) -> str | None: ...

    def set_meta(self, name: str, value: str) -> None: ...


def row_ad(run_id: str, seq: int, type_: str) -> bytes:
    """The associated data of a row: its run id (length-prefixed), seq and type."""
    return f"row|{len(run_id)}:{run_id}|{seq}|{type_}".encode("utf-8", "surrogatepass")


def recorded_key_id(log: Any) -> str | None:
    """The key id a log's key check names, or ``None`` for a log that is not encrypted."""
    get = getattr(log, "get_meta", None)
    text = get(META_KEY) if get is not None else None
    if text is None:
        return None
    try:
        return str(json.loads(text)["key_id"])
    except (ValueError, KeyError, TypeError):
        return "(unreadable)"


def key_check(codec: Codec) -> str:
    """The key check a log records for ``codec``: its key id and an AEAD tag over a constant."""
    ct = codec.encrypt(_CHECK, b"durable key check")
    return json.dumps({"key_id": codec.key_id, "check": base64.b64encode(ct).decode("ascii")})


def verify_key_check(text: str, codec: Codec, where: str) -> None:
    """Check a recorded key check against ``codec`` (nothing is read or written).

    Raises:
        KeyMismatchError: The check names a key the codec does not hold.
        CodecError: The check is damaged, or does not authenticate under the key of its id.
    """
    try:
        stored = json.loads(text)
        kid, check = str(stored["key_id"]), base64.b64decode(stored["check"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise CodecError(f"{where} has a damaged key check; restore it from a backup.") from None
    try:
        ok = codec.decrypt(check, b"durable key check") == _CHECK
    except KeyMismatchError:
        ok = False
    except CodecError:
        raise CodecError(
            f"{where}: the key check under key id {kid} does not authenticate; it was edited "
            "or the key with that id is another key. Nothing was read or written."
        ) from None
    if not ok:
        raise KeyMismatchError(
            f"{where} is encrypted under key id {kid}, and this codec (key id "
            f"{codec.key_id}) does not hold that key. Open it with the key of id {kid} "
            "(as the key, or in old_keys). Nothing was read or written.",
            key_id=kid,
        )


def refuse_plain_open(log: Any, where: str) -> None:
    """Refuse to open an encrypted log without a codec (nothing is read or written)."""
    kid = recorded_key_id(log)
    if kid is not None:
        raise KeyMismatchError(
            f"{where} is encrypted under key id {kid}, and no codec was given. Open it with "
            "codec=durable.EncryptionCodec(key); for `little`, set LITTLE_KEY or LITTLE_KEY_FILE.",
            key_id=kid,
        )


def _stored_encrypt(
    codec: Codec, blob: type[bytes] | type[bytearray] | None
) -> Callable[[bytes, bytes], object]:
    """``codec.encrypt`` giving what the backend stores: ``blob`` (bytes or bytearray), or ``enc1:`` text."""
    encrypter = getattr(codec, "encrypter", None)
    if blob is None:
        encrypt = codec.encrypt
        return lambda plain, ad: PREFIX + base64.b64encode(encrypt(plain, ad)).decode("ascii")
    if encrypter is not None:
        return encrypter(blob)  # type: ignore[no-any-return]
    if blob is bytes:
        return codec.encrypt
    encrypt = codec.encrypt
    return lambda plain, ad: blob(encrypt(plain, ad))


class EncryptedLog:
    """A log whose row payloads are encrypted by ``codec`` (every other method passes through).

    Args:
        inner: The backend (it must keep meta facts: ``SqliteLog`` and ``MemoryLog`` do).
        codec: The codec (``durable.EncryptionCodec`` or your own).
        where: How messages name the log.

    Raises:
        KeyMismatchError: The log was encrypted under a key the codec does not hold.
        CodecError: The log holds unencrypted runs (encrypt them with ``little rekey``),
            or its key check was edited.
    """

    def __init__(self, inner: EventLog, codec: Codec, *, where: str = "the event log"):
        if not (hasattr(inner, "get_meta") and hasattr(inner, "set_meta")):
            raise ConfigurationError(
                f"{type(inner).__name__} keeps no meta facts (get_meta/set_meta), so it cannot record "
                "the key check an encrypted log needs."
            )
        self.inner = inner
        self.codec = codec
        self.where = where
        self.binary = bool(getattr(inner, "stores_bytes", False))
        # sqlite3 binds a bytearray as it is, but runs every bytes parameter through its
        # adapter lookup first (two failed attribute lookups, about 1.5 µs a row): a
        # ciphertext goes to a SqliteLog as a bytearray (it reads back as bytes).
        self._blob: type[bytes] | type[bytearray] = bytearray if isinstance(inner, SqliteLog) else bytes
        self._encrypt = _stored_encrypt(codec, self._blob if self.binary else None)
        self._head = ("", "row|0:|")
        self._check(inner)

    def _check(self, inner: Any) -> None:
        text = inner.get_meta(META_KEY)
        if text is None:
            if inner.runs(limit=1):
                raise CodecError(
                    f"{self.where} holds runs that are not encrypted; a codec cannot be added to it "
                    "as it is. Encrypt it first with `little rekey` (LITTLE_KEY set to the new key), "
                    "or open it without a codec. Nothing was written."
                )
            inner.set_meta(META_KEY, key_check(self.codec))
            return
        verify_key_check(text, self.codec, self.where)

    # -- rows -----------------------------------------------------------------------

    def seal(self, run_id: str, row: Row) -> Row:
        """The row with its payload encrypted (bytes for a backend that stores them, else text)."""
        seq, type_, data = row
        ct = self.codec.encrypt(data.encode("utf-8", "surrogatepass"), row_ad(run_id, seq, type_))
        if self.binary:
            return seq, type_, self._blob(ct)  # type: ignore[return-value]  # a BLOB in the text column
        return seq, type_, PREFIX + base64.b64encode(ct).decode("ascii")

    def open(self, run_id: str, row: Row) -> Row:
        """The row with its payload decrypted.

        Raises:
            CodecError: The payload is not encrypted, or does not decrypt in this row.
            KeyMismatchError: It was encrypted under a key the codec does not hold.
        """
        seq, type_, data = row
        payload: object = data  # bytes from a backend that stores them
        try:
            if type(payload) is bytes:
                ct: bytes = payload
            elif isinstance(data, str) and data.startswith(PREFIX):
                ct = base64.b64decode(data[len(PREFIX) :], validate=True)
            else:
                raise CodecError("it is not encrypted")
            plain = self.codec.decrypt(ct, row_ad(run_id, seq, type_))
            return seq, type_, plain.decode("utf-8", "surrogatepass")
        except KeyMismatchError as exc:
            raise KeyMismatchError(
                f"run {run_id!r}: event {seq} ({type_}): {exc}", key_id=exc.key_id, run_id=run_id
            ) from None
        except (CodecError, ValueError, binascii.Error, AttributeError) as exc:
            raise CodecError(
                f"run {run_id!r}: event {seq} ({type_}) in {self.where} does not decrypt in its place "
                f"({exc}); it was moved from another row, edited or damaged. Nothing was returned in "
                f"its place. Run `little verify {run_id}` to list such events.",
                run_id=run_id,
            ) from None

    def seal_batch(self, batch: Sequence[Append]) -> list[Append]:
        """The appends with every row sealed (what ``append`` hands the backend)."""
        # ``seal`` inlined: this runs for every row the engine writes. The associated
        # data's head is kept for the last run id (a driver writes one run).
        encrypt = self._encrypt
        sealed = []
        for rid, plain, token, status, created, code in batch:
            last, head = self._head
            if rid != last:
                head = f"row|{len(rid)}:{rid}|"
                self._head = (rid, head)  # one assignment: a thread reads a matching pair
            rows: list[Row] = []
            for seq, type_, data in plain:
                ct = encrypt(
                    data.encode("utf-8", "surrogatepass"),
                    f"{head}{seq}|{type_}".encode("utf-8", "surrogatepass"),
                )
                rows.append((seq, type_, ct))  # type: ignore[arg-type]  # a BLOB or text
            sealed.append(_new_tuple(Append, (rid, rows, token, status, created, code)))
        return sealed

    def seal_append(self, append: Append) -> Append:
        """One append with every row sealed, as ``append`` seals it (for a store's own transaction)."""
        return self.seal_batch([append])[0]

    def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
        sealed = self.seal_batch(batch)
        if sync:
            self.inner.append(sealed)
        else:
            self.inner.append(sealed, sync=False)

    def append_each(self, batch: Sequence[Append]) -> list[BaseException | None]:
        """Seal and write each append of ``batch`` that is not fenced (see ``EventLog``)."""
        sealed = self.seal_batch(batch)
        each = getattr(self.inner, "append_each", None)
        return append_one_by_one(self.inner, sealed) if each is None else list(each(sealed))

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        open_ = self.open
        return [open_(run_id, r) for r in self.inner.read(run_id, after_seq)]

    def last_row(self, run_id: str) -> Row | None:
        """The inner log's last row of the run, opened (``None`` when it has none or no such method)."""
        last = getattr(self.inner, "last_row", None)
        if last is None:
            rows = self.read(run_id)
            return rows[-1] if rows else None
        row = last(run_id)
        return None if row is None else self.open(run_id, row)

    def times(self, run_id: str, after_seq: int = 0) -> dict[int, float]:
        """When each row was written (kept in the clear, as the runs' own times are)."""
        return row_times(self.inner, run_id, after_seq)

    def iter_rows(self, run_id: str, after_seq: int = 0) -> Iterator[Row]:
        open_ = self.open
        for r in self.inner.iter_rows(run_id, after_seq):
            yield open_(run_id, r)

    def rows_of_types(self, run_ids: Sequence[str], types: Sequence[str]) -> dict[str, list[Row]]:
        """The inner log's rows of these types of several runs, opened."""
        open_ = self.open
        many = getattr(self.inner, "rows_of_types", None)
        if many is None:  # a log of another program: each run read on its own
            wanted = set(types)
            return {r: [row for row in self.read(r) if row[1] in wanted] for r in run_ids}
        found: dict[str, list[Row]] = many(run_ids, types)
        return {r: [open_(r, row) for row in rows] for r, rows in found.items()}

    def compact(self, run_id: str, snapshot: Row, token: int) -> None:
        self.inner.compact(run_id, self.seal(run_id, snapshot), token)

    # -- the stores beside the log ----------------------------------------------------

    def message_store(self) -> MessageStore:
        """The inner log's message store, with every message value encrypted under the codec."""
        from ..messages._beside_log import messages_for

        return EncryptedMessages(messages_for(self.inner), self)

    def outbox_store(self) -> OutboxStore:
        """The inner log's outbox, with every entry's arguments, result and error encrypted."""
        from ..messages._beside_log import outbox_for

        return EncryptedOutbox(outbox_for(self.inner), self)

    # -- passed through ---------------------------------------------------------------

    def info(self, run_id: str) -> RunInfo | None:
        return self.inner.info(run_id)

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        return self.inner.runs(status=status, workflow=workflow, limit=limit, offset=offset, before=before)

    def count(self, *, status: str | None = None, workflow: str | None = None) -> int:
        return self.inner.count(status=status, workflow=workflow)

    def fence(self, run_id: str) -> int:
        return self.inner.fence(run_id)

    def delete_run(self, run_id: str) -> None:
        self.inner.delete_run(run_id)

    def truncate_wal(self) -> None:
        """The inner log's WAL checkpoint, where it has one."""
        truncate = getattr(self.inner, "truncate_wal", None)
        if truncate is not None:
            truncate()

    def delete_runs(self, run_ids: Sequence[str]) -> list[str]:
        """The inner log's batched delete (``gc``), or one run at a time where it has none."""
        many = getattr(self.inner, "delete_runs", None)
        if many is not None:
            deleted: list[str] = many(run_ids)
            return deleted
        for run_id in run_ids:
            self.inner.delete_run(run_id)
        return list(run_ids)

    def integrity_check(self) -> str:
        return self.inner.integrity_check()

    def vacuum(self) -> None:
        self.inner.vacuum()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # path, durability, checkpointer of the backend
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def manifest_ad(digest: str) -> bytes:
    """The associated data of an encrypted artifact manifest: the keyed name of its file."""
    return b"artifact manifest|" + digest.encode()


def open_manifest(codec: Codec, stored: dict[str, Any], digest: str) -> dict[str, Any]:
    """The plain manifest held in an encrypted artifact's manifest file.

    Raises:
        CodecError: It does not decrypt (edited, or moved from another artifact).
    """
    text = stored.get("manifest")
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise CodecError(f"the manifest of artifact file {digest} is not encrypted")
    try:
        raw = base64.b64decode(text[len(PREFIX) :], validate=True)
    except (ValueError, binascii.Error):
        raise CodecError(f"the manifest of artifact file {digest} is damaged") from None
    found: dict[str, Any] = json.loads(codec.decrypt(raw, manifest_ad(digest)))
    return found


class EncryptedArtifacts:
    """An artifact store whose payloads and manifests are encrypted, named by a keyed hash.

    A payload's file is named by the codec's keyed hash of its sha256, not by
    the sha256 itself (which would let a reader confirm a guessed content), and
    holds its ciphertext bound to that sha256. Its manifest (name, run, media
    type) is encrypted too. A reference to such an artifact has no
    ``location``: there is no plaintext file to point at; read it with
    ``ref.read()``.
    """

    def __init__(self, inner: ArtifactStore, codec: Codec):
        self.inner = inner
        self.codec = codec

    def put(self, data: bytes, manifest: dict[str, Any]) -> str | None:
        if self.get(manifest["sha256"]) == data:
            return None
        self.write(data, manifest)
        return None

    def write(self, data: bytes, manifest: dict[str, Any]) -> None:
        """Encrypt and store ``data`` under the current key, even when an older copy exists."""
        self.inner.put(*self.sealed(data, manifest))

    def sealed(self, data: bytes, manifest: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        """What the inner store keeps of an artifact: its ciphertext, and the manifest naming it.

        The stored manifest's ``sha256`` is the keyed hash of the payload's
        sha256 under the current key, and holds the plain manifest encrypted.
        """
        sha = manifest["sha256"]
        digest = self.codec.digests(sha.encode())[0]
        meta = self.codec.encrypt(json.dumps(manifest, sort_keys=True).encode(), manifest_ad(digest))
        return self.codec.encrypt(data, b"artifact|" + sha.encode()), {
            "sha256": "sha256:" + digest,
            "key_id": self.codec.key_id,
            "manifest": PREFIX + base64.b64encode(meta).decode("ascii"),
        }

    def get(self, sha256: str) -> bytes | None:
        for digest in self.codec.digests(sha256.encode()):
            raw = self.inner.get("sha256:" + digest)
            if raw is not None:
                try:
                    return self.codec.decrypt(raw, b"artifact|" + sha256.encode())
                except CodecError as exc:
                    raise ArtifactIntegrityError(
                        f"the artifact with hash {sha256} does not decrypt ({exc}). Restore it from a "
                        "backup, or start a new run id.",
                        artifact=sha256,
                        expected=sha256,
                    ) from None
        return None

    def delete(self, sha256: str) -> None:
        for digest in self.codec.digests(sha256.encode()):
            self.inner.delete("sha256:" + digest)

    def holds_any(self) -> bool:
        """Whether the store holds any payload (``gc`` reads the logs of the runs it deletes only then)."""
        holds = getattr(self.inner, "holds_any", None)
        return holds is None or bool(holds())

    def resolve(self, location: str | None) -> Path | None:
        return self.inner.resolve(location)
