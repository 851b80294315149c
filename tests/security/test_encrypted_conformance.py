"""An encrypted log keeps every rule of the store protocol: the public conformance suite on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.store import EncryptedLog, EventLog, MemoryLog, SqliteLog
from durable.store.conformance import EventLogConformance

pytest.importorskip("cryptography")

from durable import EncryptionCodec

CODEC = EncryptionCodec(bytes(range(32)))


class TestEncryptedSqliteLog(EventLogConformance):
    def open_log(self, where: Path) -> EventLog:
        return EncryptedLog(SqliteLog(where / "events.db"), CODEC)


class TestEncryptedMemoryLog(EventLogConformance):
    reopens = False

    def open_log(self, where: Path) -> EventLog:
        return EncryptedLog(MemoryLog(), CODEC)


def test_the_rows_under_the_wrapper_are_ciphertext(tmp_path: Path) -> None:
    from durable.store import Append

    log = EncryptedLog(SqliteLog(tmp_path / "events.db"), CODEC)
    token = log.fence("r")
    log.append([Append("r", [(1, "run.started", '{"card": "4242"}')], token, created=("wf", None))])
    assert log.read("r") == [(1, "run.started", '{"card": "4242"}')]
    raw = log.inner.read("r")
    assert type(raw[0][2]) is bytes and b"4242" not in raw[0][2]
    log.close()


class TestEncryptedSqliteLogPowerDurability(EventLogConformance):
    def open_log(self, where: Path) -> EventLog:
        return EncryptedLog(SqliteLog(where / "events.db", durability="power"), CODEC)


def test_the_wrapper_passes_an_unsynced_append_through_sealed() -> None:
    """A plain tool's receipt asks for ``sync=False``; the backend gets it, with ciphertext rows."""
    from collections.abc import Sequence

    from durable.store import Append

    seen: list[tuple[bool, object]] = []

    class Recording(MemoryLog):
        def append(self, batch: Sequence[Append], *, sync: bool = True) -> None:
            seen.append((sync, batch[0].rows[0][2]))
            super().append(batch, sync=sync)

    log = EncryptedLog(Recording(), CODEC)
    token = log.fence("r")
    log.append(
        [Append("r", [(1, "run.started", '{"card": "4242"}')], token, created=("wf", None))], sync=False
    )
    log.append([Append("r", [(2, "run.completed", '{"out": 1}')], token)])
    assert [s for s, _ in seen] == [False, True]
    assert all(type(d) is bytes and b"4242" not in d for _, d in seen)
    assert log.read("r")[0] == (1, "run.started", '{"card": "4242"}')
