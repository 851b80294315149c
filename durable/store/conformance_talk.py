"""The rules of the message, outbox and schedule stores, as pytest tests a new backend can run.

Subclass a class here in your test suite and say how to open your backend;
pytest runs every rule against it. ``MessageStoreConformance`` and
``OutboxStoreConformance`` need a log and the store that lives beside it
(they commit together); ``ScheduleStoreConformance`` needs the store alone.
durable's own tests run them on the memory and SQLite stores
(``tests/store/test_talk_conformance.py``)::

    class TestMyMessages(MessageStoreConformance):
        def open_pair(self, where: Path) -> tuple[EventLog, MessageStore]:
            log = MyLog(where)
            return log, log.message_store()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..errors import FencedError
from ..events import EFFECT_INTENT, EFFECT_RECEIPT, MESSAGE_RECEIVED, RUN_STARTED
from .log._protocol import Append, EventLog
from .messages._protocol import Message, MessageStore
from .outbox._protocol import OutboxEntry, OutboxStore
from .schedules._protocol import ScheduleRecord, ScheduleStore


def _start(log: EventLog, run_id: str) -> int:
    token = log.fence(run_id)
    log.append([Append(run_id, [(1, RUN_STARTED, "{}")], token, created=("wf", None))])
    return token


def _received(seq: int) -> Any:
    def build(msg: Message) -> tuple[int, str, str]:
        return (seq, MESSAGE_RECEIVED, f'{{"value":{msg.data}}}')

    return build


class MessageStoreConformance:
    """The rules every ``MessageStore`` keeps, checked against the log it lives beside."""

    def open_pair(self, where: Path) -> tuple[EventLog, MessageStore]:
        """A new log over ``where`` (an empty folder) and its message store."""
        raise NotImplementedError

    def test_a_message_id_is_stored_once(self, tmp_path: Path) -> None:
        """A second send with the same id stores nothing and says so."""
        _, store = self.open_pair(tmp_path)
        assert store.send("r", None, '"a"', "m1", 1.0) is True
        assert store.send("r", None, '"b"', "m1", 2.0) is False
        assert [m.data for m in store.messages("r")] == ['"a"']

    def test_consume_takes_the_oldest_of_its_topic_and_appends_its_row(self, tmp_path: Path) -> None:
        """FIFO per topic; the row is in the log and the message is marked with its seq."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        store.send("r", "t", '"t1"', "m1", 1.0)
        store.send("r", None, '"d1"', "m2", 2.0)
        store.send("r", None, '"d2"', "m3", 3.0)
        assert store.waiting("r", None)
        assert store.waiting("r", "t")
        assert not store.waiting("r", "x")
        got = store.consume("r", None, token, _received(2))
        assert got is not None
        assert got.data == '"d1"'
        assert got.consumed_seq == 2
        assert log.read("r", 1) == [(2, MESSAGE_RECEIVED, '{"value":"d1"}')]
        assert [m.data for m in store.messages("r", pending=True)] == ['"t1"', '"d2"']

    def test_consume_with_nothing_waiting_writes_nothing(self, tmp_path: Path) -> None:
        """No message: ``None``, and the log is unchanged."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        assert store.consume("r", None, token, _received(2)) is None
        assert len(log.read("r")) == 1

    def test_a_stale_token_consumes_nothing(self, tmp_path: Path) -> None:
        """A fenced driver's consume raises; the message stays and the log is unchanged."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        log.fence("r")
        store.send("r", None, '"a"', "m1", 1.0)
        with pytest.raises(FencedError):
            store.consume("r", None, token, _received(2))
        assert len(store.messages("r", pending=True)) == 1
        assert len(log.read("r")) == 1

    def test_a_taken_seq_consumes_nothing(self, tmp_path: Path) -> None:
        """A row whose seq is stored already is refused; the message stays."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        store.send("r", None, '"a"', "m1", 1.0)
        with pytest.raises(FencedError):
            store.consume("r", None, token, _received(1))
        assert len(store.messages("r", pending=True)) == 1

    def test_delete_run_forgets_its_messages_only(self, tmp_path: Path) -> None:
        """A run's mailbox goes with it; another run's stays."""
        _, store = self.open_pair(tmp_path)
        store.send("r", None, '"a"', "m1", 1.0)
        store.send("s", None, '"b"', "m2", 1.0)
        store.delete_run("r")
        assert store.messages("r") == []
        assert len(store.messages("s")) == 1


def _entry(key: str, now: float = 1.0) -> OutboxEntry:
    return OutboxEntry(key, "r", "email", '{"to":"a"}', created_at=now, next_at=now, updated_at=now)


class OutboxStoreConformance:
    """The rules every ``OutboxStore`` keeps, checked against the log it lives beside."""

    def open_pair(self, where: Path) -> tuple[EventLog, OutboxStore]:
        """A new log over ``where`` (an empty folder) and its outbox."""
        raise NotImplementedError

    def test_enqueue_appends_the_rows_and_stores_the_entry(self, tmp_path: Path) -> None:
        """Both are there after one call."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        store.enqueue(Append("r", [(2, EFFECT_INTENT, "{}"), (3, EFFECT_RECEIPT, "{}")], token), _entry("k"))
        assert [s for s, _, _ in log.read("r")] == [1, 2, 3]
        got = store.get("k")
        assert got is not None
        assert got.state == "pending"
        assert got.attempts == 0

    def test_a_stale_token_enqueues_nothing(self, tmp_path: Path) -> None:
        """A fenced driver's enqueue raises; neither rows nor entry are stored."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        log.fence("r")
        with pytest.raises(FencedError):
            store.enqueue(Append("r", [(2, EFFECT_INTENT, "{}")], token), _entry("k"))
        assert store.get("k") is None
        assert len(log.read("r")) == 1

    def test_attempts_deliveries_failures_and_the_dead_letter(self, tmp_path: Path) -> None:
        """An entry goes pending → attempted → due later → dead → pending again → delivered."""
        log, store = self.open_pair(tmp_path)
        token = _start(log, "r")
        store.enqueue(Append("r", [(2, EFFECT_INTENT, "{}")], token), _entry("k"))
        assert [e.key for e in store.due(1.0)] == ["k"]
        first = store.start_attempt("k", "w1", 1.0)
        assert first is not None
        assert first.attempts == 1
        assert first.owner == "w1"
        store.fail("k", "boom", 5.0, 1.5)
        assert store.due(4.0) == []
        assert [e.key for e in store.due(5.0)] == ["k"]
        store.fail("k", "boom again", None, 6.0)
        dead = store.get("k")
        assert dead is not None
        assert dead.state == "dead"
        assert dead.error == "boom again"
        assert store.start_attempt("k", "w1", 7.0) is None
        assert [e.key for e in store.entries("dead")] == ["k"]
        back = store.retry_dead("k", 8.0)
        assert back is not None
        assert back.state == "pending"
        assert back.attempts == 0
        assert store.retry_dead("k", 8.0) is None
        store.deliver("k", '"ok"', 9.0)
        done = store.get("k")
        assert done is not None
        assert done.state == "delivered"
        assert done.result == '"ok"'
        assert store.due(100.0) == []


class ScheduleStoreConformance:
    """The rules every ``ScheduleStore`` keeps."""

    def open_store(self, where: Path) -> ScheduleStore:
        """A new store over ``where`` (an empty folder)."""
        raise NotImplementedError

    def test_upsert_keeps_the_state_of_an_existing_schedule(self, tmp_path: Path) -> None:
        """A new definition replaces the old one; pause, last tick and creation time stay."""
        store = self.open_store(tmp_path)
        store.upsert(ScheduleRecord("s", "wf", every=60.0, created_at=1.0))
        assert store.advance("s", None, 60.0, 2.0)
        store.set_paused("s", True, 3.0)
        got = store.upsert(ScheduleRecord("s", "wf2", cron="0 3 * * *", created_at=9.0))
        assert (got.workflow, got.cron, got.paused, got.last_tick, got.created_at) == (
            "wf2",
            "0 3 * * *",
            True,
            60.0,
            1.0,
        )
        assert store.get("s") == got
        assert [r.name for r in store.all()] == ["s"]

    def test_advance_is_a_compare_and_set(self, tmp_path: Path) -> None:
        """Only the writer that saw the current last tick moves it."""
        store = self.open_store(tmp_path)
        store.upsert(ScheduleRecord("s", "wf", every=60.0))
        assert store.advance("s", None, 60.0, 1.0)
        assert not store.advance("s", None, 120.0, 1.0)
        assert store.advance("s", 60.0, 120.0, 1.0)
        got = store.get("s")
        assert got is not None
        assert got.last_tick == 120.0

    def test_pause_and_delete_name_a_schedule(self, tmp_path: Path) -> None:
        """Unknown names answer ``None`` or ``False``."""
        store = self.open_store(tmp_path)
        assert store.set_paused("nope", True, 1.0) is None
        assert store.delete("nope") is False
        store.upsert(ScheduleRecord("s", "wf", every=60.0))
        assert store.delete("s") is True
        assert store.get("s") is None
