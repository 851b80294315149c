"""Memory items encrypted at rest: an item's text and metadata under the world's codec.

A store opened with a codec keeps each item's ``text`` and ``metadata`` as
ciphertext (BLOBs in their columns), each bound to the item's namespace, key
and column as associated data, so a ciphertext copied to another item or
column does not decrypt. What stays in the clear: namespaces and keys (the
index a namespace prefix and a put's replace need), timestamps, the
dimension and metric, and the vectors (``sqlite-vec`` measures distances on
them inside SQLite, so they cannot be encrypted without giving up its
search; the security page says what a vector can reveal).

A metadata filter cannot be evaluated over ciphertext: the store decrypts
the metadata of every item under the searched namespace prefix and hands
the plain texts to the same SQL condition as one JSON parameter, so a
filter means exactly what it means in a plain store and still picks the
candidates before the top-k cut.

The store records a key check in its ``settings`` table (the one of the
event log's format); a store opened with another key, or without one, is
refused before anything is read or written.
"""

from __future__ import annotations

from typing import Any

from ..errors import CodecError, KeyMismatchError, MemoryStoreError
from ..security import Codec
from ..store import META_KEY, key_check, recorded_key_id, verify_key_check
from ._db import VecDb

INSTALL_KEY_HINT = (
    "Open it with codec=durable.EncryptionCodec(key); for `little`, set LITTLE_KEY or LITTLE_KEY_FILE."
)


def item_ad(ns: str, key: str, column: str) -> bytes:
    """The associated data of one column of one item: its namespace text and key, length-prefixed."""
    return f"memory|{column}|{len(ns)}:{ns}|{len(key)}:{key}".encode("utf-8", "surrogatepass")


class _Settings:
    """``get_meta`` over a memory database's ``settings`` table (for ``recorded_key_id``)."""

    def __init__(self, db: VecDb):
        self.db = db

    def get_meta(self, name: str) -> str | None:
        got = self.db.query("SELECT value FROM settings WHERE name = ?", [name])
        return str(got[0][0]) if got else None


def recorded_check(db: VecDb) -> str | None:
    """The key check a memory database records, or ``None`` when it is not encrypted."""
    return _Settings(db).get_meta(META_KEY)


def stored_key_id(db: VecDb) -> str | None:
    """The key id a memory database's key check names, or ``None`` when it is not encrypted."""
    return recorded_key_id(_Settings(db))


def check_store_key(db: VecDb, codec: Codec | None) -> None:
    """Refuse a store opened without its key or with another; record the check of a new one.

    Raises:
        KeyMismatchError: The store is encrypted and ``codec`` is missing or holds another key.
        CodecError: ``codec`` is given but the store holds items in the clear, or the
            check does not authenticate.
    """
    where = f"the memory store {db.path!r}"
    text = _Settings(db).get_meta(META_KEY)
    if codec is None:
        if text is not None:
            kid = stored_key_id(db)
            raise KeyMismatchError(
                f"{where} is encrypted under key id {kid}, and no codec was given. {INSTALL_KEY_HINT}",
                key_id=kid,
            )
        return
    if text is not None:
        verify_key_check(text, codec, where)
        return
    with db.write():
        if db.query("SELECT 1 FROM items LIMIT 1"):
            raise CodecError(
                f"{where} holds items that are not encrypted; a codec cannot be added to it as it "
                "is. Encrypt the data directory first with `little rekey` (LITTLE_KEY set to the "
                "new key), or open it without a codec. Nothing was written."
            )
        db.run("INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)", [META_KEY, key_check(codec)])


class ItemCipher:
    """Seals and opens the text and metadata columns of memory items under a codec."""

    def __init__(self, codec: Codec, where: str):
        self.codec = codec
        self.where = where

    def seal(self, ns: str, key: str, column: str, plain: str) -> bytes:
        """The ciphertext of one column of one item."""
        return self.codec.encrypt(plain.encode("utf-8", "surrogatepass"), item_ad(ns, key, column))

    def open(self, ns: str, key: str, column: str, stored: Any) -> str:
        """The plaintext of one column of one item.

        Raises:
            KeyMismatchError: It was encrypted under a key the codec does not hold.
            CodecError: It is not encrypted, or does not decrypt in its place
                (moved from another item or column, edited or damaged).
        """
        label = f"the {column} of memory item {key!r} in namespace {ns}"
        if type(stored) is not bytes:
            raise CodecError(
                f"{label} in {self.where} is not encrypted; the store was edited. Restore it "
                "from a backup, or put the item again."
            )
        try:
            return self.codec.decrypt(stored, item_ad(ns, key, column)).decode("utf-8", "surrogatepass")
        except KeyMismatchError as exc:
            raise KeyMismatchError(f"{label}: {exc}", key_id=exc.key_id) from None
        except (CodecError, UnicodeDecodeError) as exc:
            raise CodecError(
                f"{label} in {self.where} does not decrypt in its place ({exc}); it was moved from "
                "another item, edited or damaged. Restore it from a backup, or put the item again."
            ) from None


def rekey_items(db: VecDb, old: Codec | None, new: Codec | None) -> int:
    """Rewrite every item's text and metadata under ``new`` (``None``: in the clear), in one transaction.

    Returns:
        How many items were rewritten.

    Raises:
        KeyMismatchError: ``old`` does not hold the store's key (nothing was changed).
        CodecError: An item does not decrypt (nothing was changed).
    """
    where = f"the memory store {db.path!r}"
    text = _Settings(db).get_meta(META_KEY)
    reader = None
    if text is not None:
        if old is None:
            raise MemoryStoreError(f"{where} is encrypted under key id {stored_key_id(db)}: give that key.")
        verify_key_check(text, old, where)
        reader = ItemCipher(old, where)
    writer = ItemCipher(new, where) if new is not None else None
    n = 0
    with db.write():
        for rowid, ns, key, t, m in db.query("SELECT id, ns, key, text, metadata FROM items"):
            if reader is not None:
                t, m = reader.open(ns, key, "text", t), reader.open(ns, key, "metadata", m)
            if writer is not None:
                t, m = writer.seal(ns, key, "text", t), writer.seal(ns, key, "metadata", m)
            db.run("UPDATE items SET text = ?, metadata = ? WHERE id = ?", [t, m, rowid])
            n += 1
        if new is None:
            db.run("DELETE FROM settings WHERE name = ?", [META_KEY])
        else:
            db.run("INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)", [META_KEY, key_check(new)])
    return n
