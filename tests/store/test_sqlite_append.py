"""The SQLite log's one-statement append keeps every rule of the transactional one."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable import FencedError, SqliteLog
from durable.store import Append


def _log(tmp_path: Path) -> SqliteLog:
    return SqliteLog(tmp_path / "events.db")


def test_rows_append_in_one_statement(tmp_path: Path) -> None:
    """Rows appended with the current token are all written, in seq order."""
    log = _log(tmp_path)
    token = log.fence("r")
    log.append([Append("r", [(1, "a", "{}"), (2, "b", "{}")], token)])
    log.append([Append("r", [(3, "c", "{}")], token)])
    assert [r[0] for r in log.read("r")] == [1, 2, 3]


def test_stale_token_writes_nothing(tmp_path: Path) -> None:
    """A writer whose token was superseded is refused and none of its rows land."""
    log = _log(tmp_path)
    old = log.fence("r")
    log.fence("r")
    with pytest.raises(FencedError, match="stale"):
        log.append([Append("r", [(1, "a", "{}"), (2, "b", "{}")], old)])
    assert log.read("r") == []


def test_taken_seq_writes_nothing(tmp_path: Path) -> None:
    """A batch that reuses a written seq fails as a whole, leaving the log as it was."""
    log = _log(tmp_path)
    token = log.fence("r")
    log.append([Append("r", [(1, "a", "{}")], token)])
    with pytest.raises(FencedError, match="already written"):
        log.append([Append("r", [(2, "b", "{}"), (1, "x", "{}")], token)])
    assert [r[0] for r in log.read("r")] == [1]


def test_second_connection_sees_the_token(tmp_path: Path) -> None:
    """A fence taken through another connection to the file stops this one's writes."""
    first, second = _log(tmp_path), _log(tmp_path)
    token = first.fence("r")
    first.append([Append("r", [(1, "a", "{}")], token)])
    second.fence("r")
    with pytest.raises(FencedError):
        first.append([Append("r", [(2, "b", "{}")], token)])


def test_large_batches_take_the_transactional_path(tmp_path: Path) -> None:
    """A batch larger than one statement's share is still written whole."""
    log = _log(tmp_path)
    token = log.fence("r")
    log.append([Append("r", [(i, "a", "{}") for i in range(1, 501)], token)])
    assert len(log.read("r")) == 500


def test_iter_rows_streams_what_read_returns(tmp_path: Path) -> None:
    """Streaming a run in small chunks yields exactly the rows of one ``read``."""
    log = _log(tmp_path)
    token = log.fence("r")
    for i in range(1, 12, 3):
        log.append([Append("r", [(i, "a", "{}"), (i + 1, "b", "{}"), (i + 2, "c", "{}")], token)])
    assert list(log.iter_rows("r", chunk=5)) == log.read("r")
    assert list(log.iter_rows("r", after_seq=4, chunk=2)) == log.read("r", after_seq=4)
    assert list(log.iter_rows("nobody")) == []
