"""Encrypted messages and outbox entries: the stores beside an ``EncryptedLog``.

``EncryptedLog.message_store()`` and ``EncryptedLog.outbox_store()`` return
the inner log's store wrapped by ``EncryptedMessages`` and
``EncryptedOutbox``: every payload that can hold user data is encrypted
under the log's codec before it is stored and decrypted when it is read.

- A message's value is bound to its run id, topic and message id, so a
  ciphertext copied to another message or run does not decrypt.
- An outbox entry's arguments, result and error are bound to the entry's
  key and the field, so none of them decrypts in another entry or field.
- The log rows a store writes in its own transaction (the
  ``message.received`` row of ``consume``, the rows of ``enqueue``) are
  sealed exactly as ``EncryptedLog.append`` seals them.

``EncryptedSchedules`` does the same for a schedule's stored input (bound
to the schedule's name) in ``runtime.db``.

What stays in the clear: run ids, topics, message ids, outbox keys, tool
names, states, attempt counts, owners and times, and a schedule's every
field but its input.
"""

from __future__ import annotations

import base64
import binascii
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ...errors import CodecError, KeyMismatchError
from ...security import Codec
from ..log._protocol import Append, Row
from ..messages._protocol import Message, MessageStore
from ..outbox._protocol import OutboxEntry, OutboxStore
from ..schedules._protocol import ScheduleRecord, ScheduleStore


class Sealer(Protocol):
    """What the stores here need of the encrypted log beside them (``EncryptedLog`` is one)."""

    codec: Codec

    def seal(self, run_id: str, row: Row) -> Row:
        """The row with its payload encrypted, as the log's ``append`` stores it."""
        ...

    def seal_append(self, append: Append) -> Append:
        """One append with every row sealed."""
        ...


PREFIX = "enc1:"


def _framed(value: str) -> str:
    return f"{len(value)}:{value}"


def message_ad(run_id: str, topic: str | None, message_id: str) -> bytes:
    """The associated data of a message's value: its run id, topic and message id (length-prefixed)."""
    t = "-" if topic is None else "t" + _framed(topic)
    return f"message|{_framed(run_id)}|{t}|{_framed(message_id)}".encode("utf-8", "surrogatepass")


def outbox_ad(key: str, field: str) -> bytes:
    """The associated data of an outbox entry's ``field`` (input, result, error): its key and the field."""
    return f"outbox|{_framed(key)}|{field}".encode("utf-8", "surrogatepass")


def seal_text(codec: Codec, text: str, ad: bytes) -> str:
    """``text`` encrypted under ``codec`` and bound to ``ad``, as ``enc1:<base64>``."""
    ct = codec.encrypt(text.encode("utf-8", "surrogatepass"), ad)
    return PREFIX + base64.b64encode(ct).decode("ascii")


def open_text(codec: Codec, text: str, ad: bytes, what: str, run_id: str | None) -> str:
    """The plain text of ``seal_text``'s output.

    Raises:
        CodecError: It is not encrypted, or does not decrypt bound to ``ad``
            (moved from another message or entry, edited or damaged).
        KeyMismatchError: It was encrypted under a key the codec does not hold.
    """
    try:
        if not isinstance(text, str) or not text.startswith(PREFIX):
            raise CodecError("it is not encrypted")
        ct = base64.b64decode(text[len(PREFIX) :], validate=True)
        return codec.decrypt(ct, ad).decode("utf-8", "surrogatepass")
    except KeyMismatchError as exc:
        raise KeyMismatchError(f"{what}: {exc}", key_id=exc.key_id, run_id=run_id) from None
    except (CodecError, ValueError, binascii.Error) as exc:
        raise CodecError(
            f"{what} does not decrypt in its place ({exc}); it was moved from another one, edited "
            "or damaged. Nothing was returned in its place.",
            run_id=run_id,
        ) from None


class EncryptedMessages:
    """A message store whose values are encrypted (``EncryptedLog.message_store()``).

    Args:
        inner: The inner log's message store (``SqliteMessages``, ``MemoryMessages``, ...).
        log: The encrypted log; rows written in ``consume`` are sealed by it.
    """

    def __init__(self, inner: MessageStore, log: Sealer):
        self.inner = inner
        self.log = log
        self.codec = log.codec

    def _open(self, m: Message) -> Message:
        what = f"message {m.message_id!r} to run {m.run_id!r}"
        data = open_text(self.codec, m.data, message_ad(m.run_id, m.topic, m.message_id), what, m.run_id)
        return replace(m, data=data)

    def send(self, run_id: str, topic: str | None, data: str, message_id: str, now: float) -> bool:
        sealed = seal_text(self.codec, data, message_ad(run_id, topic, message_id))
        return self.inner.send(run_id, topic, sealed, message_id, now)

    def waiting(self, run_id: str, topic: str | None) -> bool:
        return self.inner.waiting(run_id, topic)

    def consume(
        self, run_id: str, topic: str | None, token: int, build: Callable[[Message], Row]
    ) -> Message | None:
        seal, open_ = self.log.seal, self._open

        def sealed_build(stored: Message) -> Row:
            # The row goes into the log inside the store's own transaction, past
            # EncryptedLog.append: it is sealed here exactly as append seals it.
            return seal(run_id, build(open_(stored)))

        got = self.inner.consume(run_id, topic, token, sealed_build)
        return None if got is None else open_(got)

    def messages(self, run_id: str, *, pending: bool = False) -> list[Message]:
        return [self._open(m) for m in self.inner.messages(run_id, pending=pending)]

    def delete_run(self, run_id: str) -> None:
        self.inner.delete_run(run_id)


class EncryptedOutbox:
    """An outbox whose entries' arguments, results and errors are encrypted (``EncryptedLog.outbox_store()``).

    Args:
        inner: The inner log's outbox (``SqliteOutbox``, ``MemoryOutbox``, ...).
        log: The encrypted log; the rows of ``enqueue`` are sealed by it.
    """

    def __init__(self, inner: OutboxStore, log: Sealer):
        self.inner = inner
        self.log = log
        self.codec = log.codec

    def _seal(self, key: str, field: str, text: str) -> str:
        return seal_text(self.codec, text, outbox_ad(key, field))

    def _field(self, e: OutboxEntry, field: str, text: str | None) -> str | None:
        if text is None:
            return None
        what = f"the {field} of outbox entry {e.key!r}"
        return open_text(self.codec, text, outbox_ad(e.key, field), what, e.run_id)

    def _open(self, e: OutboxEntry | None) -> OutboxEntry | None:
        if e is None:
            return None
        return replace(
            e,
            input=self._field(e, "input", e.input) or "",
            result=self._field(e, "result", e.result),
            error=self._field(e, "error", e.error),
        )

    def _open_all(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        return [e for e in map(self._open, entries) if e is not None]

    def enqueue(self, append: Append, entry: OutboxEntry) -> None:
        sealed = replace(
            entry,
            input=self._seal(entry.key, "input", entry.input),
            result=None if entry.result is None else self._seal(entry.key, "result", entry.result),
            error=None if entry.error is None else self._seal(entry.key, "error", entry.error),
        )
        self.inner.enqueue(self.log.seal_append(append), sealed)

    def due(self, now: float, limit: int = 100) -> list[OutboxEntry]:
        return self._open_all(self.inner.due(now, limit))

    def get(self, key: str) -> OutboxEntry | None:
        return self._open(self.inner.get(key))

    def start_attempt(self, key: str, owner: str, now: float) -> OutboxEntry | None:
        return self._open(self.inner.start_attempt(key, owner, now))

    def deliver(self, key: str, result: str, now: float) -> None:
        self.inner.deliver(key, self._seal(key, "result", result), now)

    def fail(self, key: str, error: str, next_at: float | None, now: float) -> None:
        self.inner.fail(key, self._seal(key, "error", error), next_at, now)

    def retry_dead(self, key: str, now: float) -> OutboxEntry | None:
        return self._open(self.inner.retry_dead(key, now))

    def entries(self, state: str | None = None, run_id: str | None = None) -> list[OutboxEntry]:
        return self._open_all(self.inner.entries(state, run_id))

    def delete_run(self, run_id: str) -> None:
        self.inner.delete_run(run_id)


def _reseal(old: Codec | None, new: Codec | None, text: str, ad: bytes, what: str, run_id: str) -> str:
    plain = open_text(old, text, ad, what, run_id) if old is not None else text
    return seal_text(new, plain, ad) if new is not None else plain


def rekey_talk(db: sqlite3.Connection, old: Codec | None, new: Codec | None) -> int:
    """Rewrite every message value and outbox payload of ``events.db`` from ``old`` to ``new``.

    ``None`` stands for the clear on either side. Runs inside the caller's
    transaction (``little rekey`` rewrites the log's rows in the same one).

    Returns:
        How many messages and outbox entries were rewritten.

    Raises:
        CodecError: A payload does not decrypt under ``old``.
    """
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = 0
    if "messages" in tables:
        for mid, run_id, topic, message_id, data in db.execute(
            "SELECT id, run_id, topic, message_id, data FROM messages"
        ).fetchall():
            what = f"message {message_id!r} to run {run_id!r}"
            ad = message_ad(run_id, topic, message_id)
            db.execute(
                "UPDATE messages SET data = ? WHERE id = ?", (_reseal(old, new, data, ad, what, run_id), mid)
            )
            n += 1
    if "outbox" in tables:
        for key, run_id, *fields in db.execute(
            "SELECT key, run_id, input, result, error FROM outbox"
        ).fetchall():
            values = [
                None
                if text is None
                else _reseal(old, new, text, outbox_ad(key, f), f"the {f} of outbox entry {key!r}", run_id)
                for f, text in zip(("input", "result", "error"), fields, strict=True)
            ]
            db.execute("UPDATE outbox SET input = ?, result = ?, error = ? WHERE key = ?", (*values, key))
            n += 1
    return n


def schedule_ad(name: str) -> bytes:
    """The associated data of a schedule's stored input: the schedule's name."""
    return f"schedule|{_framed(name)}".encode("utf-8", "surrogatepass")


class EncryptedSchedules:
    """A schedule store whose records' inputs are encrypted under ``codec``, bound to the schedule's name.

    Every other field (name, workflow, cron or interval, zone, queue, catch-up
    mode, pause, ticks and times) stays in the clear: workers read them to
    find due ticks.

    Args:
        inner: The world's schedule store (``SqliteSchedules`` in ``runtime.db``, ``MemorySchedules``).
        codec: The world's codec.
    """

    def __init__(self, inner: ScheduleStore, codec: Codec):
        self.inner = inner
        self.codec = codec

    def _open(self, r: ScheduleRecord | None) -> ScheduleRecord | None:
        if r is None:
            return None
        what = f"the input of schedule {r.name!r}"
        return replace(r, input=open_text(self.codec, r.input, schedule_ad(r.name), what, None))

    def upsert(self, record: ScheduleRecord) -> ScheduleRecord:
        sealed = replace(record, input=seal_text(self.codec, record.input, schedule_ad(record.name)))
        return replace(self.inner.upsert(sealed), input=record.input)

    def get(self, name: str) -> ScheduleRecord | None:
        return self._open(self.inner.get(name))

    def all(self) -> list[ScheduleRecord]:
        return [r for r in map(self._open, self.inner.all()) if r is not None]

    def set_paused(self, name: str, paused: bool, now: float) -> ScheduleRecord | None:
        return self._open(self.inner.set_paused(name, paused, now))

    def delete(self, name: str) -> bool:
        return self.inner.delete(name)

    def advance(self, name: str, expected: float | None, tick: float, now: float) -> bool:
        return self.inner.advance(name, expected, tick, now)

    def close(self) -> None:
        """Close the inner store."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
