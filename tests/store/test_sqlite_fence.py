"""The fence of a run the SQLite log has never seen: taken by its first append, in one commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import FencedError
from durable.store import Append, SqliteLog


def _statements(log: SqliteLog) -> list[str]:
    seen: list[str] = []
    log._db.set_trace_callback(lambda sql: seen.append(sql.split(None, 1)[0].upper()))
    return seen


def test_a_new_runs_fence_writes_nothing_and_its_first_append_is_one_commit(tmp_path: Path) -> None:
    """Fencing a new run only reads; its first append creates the run's row and its events together."""
    log = SqliteLog(tmp_path / "events.db")
    seen = _statements(log)
    token = log.fence("r")
    assert "BEGIN" not in seen and "INSERT" not in seen and "UPDATE" not in seen
    log.append([Append("r", [(1, "run.started", "{}")], token, created=("wf", None))])
    assert seen.count("BEGIN") == 1 and seen.count("COMMIT") == 1
    assert [r[:2] for r in log.read("r")] == [(1, "run.started")]
    assert log.fence("r") > token  # a run with a row is fenced for real


def test_of_two_new_fences_only_the_first_to_append_writes(tmp_path: Path) -> None:
    """Two logs on one file fence a new run: the later first append is stale and writes nothing."""
    a, b = SqliteLog(tmp_path / "events.db"), SqliteLog(tmp_path / "events.db")
    ta, tb = a.fence("r"), b.fence("r")
    b.append([Append("r", [(1, "run.started", '{"by":"b"}')], tb)])
    with pytest.raises(FencedError, match="stale"):
        a.append([Append("r", [(1, "run.started", '{"by":"a"}')], ta)])
    assert [r[2] for r in a.read("r")] == ['{"by":"b"}']


def test_a_real_fence_after_a_new_one_makes_the_new_token_stale(tmp_path: Path) -> None:
    """Another log fences the run for real before the first append: that append is refused."""
    a, b = SqliteLog(tmp_path / "events.db"), SqliteLog(tmp_path / "events.db")
    ta = a.fence("r")
    b._db.execute("INSERT INTO runs (run_id, token) VALUES ('r', 0)")  # as an older writer registers it
    tb = b.fence("r")
    with pytest.raises(FencedError):
        a.append([Append("r", [(1, "run.started", "{}")], ta)])
    b.append([Append("r", [(1, "run.started", "{}")], tb)])
    assert len(b.read("r")) == 1


def test_fencing_a_new_run_twice_in_one_log_makes_the_first_token_stale(tmp_path: Path) -> None:
    """A second drive in the same process takes a greater token; the first drive's writes fail."""
    log = SqliteLog(tmp_path / "events.db")
    first = log.fence("r")
    second = log.fence("r")
    assert second > first
    with pytest.raises(FencedError):
        log.append([Append("r", [(1, "run.started", "{}")], first)])
    log.append([Append("r", [(1, "run.started", "{}")], second)])
    assert len(log.read("r")) == 1


def test_a_run_with_events_but_no_row_is_fenced_for_real(tmp_path: Path) -> None:
    """Events written without a token (an older writer) make the fence a write, as before."""
    log = SqliteLog(tmp_path / "events.db")
    log.append([Append("r", [(1, "run.started", "{}")], 0)])
    token = log.fence("r")
    with pytest.raises(FencedError):
        log.append([Append("r", [(2, "step.completed", "{}")], 0)])
    log.append([Append("r", [(2, "run.completed", "{}")], token)])
    assert [r[0] for r in log.read("r")] == [1, 2]


def test_the_read_right_after_a_new_runs_fence_sends_no_query(tmp_path: Path) -> None:
    """The fence saw no event, so the driver's read that follows is answered empty; later reads ask."""
    log = SqliteLog(tmp_path / "events.db")
    token = log.fence("r")
    seen = _statements(log)
    assert list(log.iter_rows("r")) == []
    assert seen == []
    assert log.read("r") == []  # the mark is used once
    assert seen == ["SELECT"]
    log.append([Append("r", [(1, "run.started", "{}")], token, created=("wf", None))])
    assert [r[:2] for r in log.read("r")] == [(1, "run.started")]


def test_a_run_started_by_another_writer_after_the_fence_refuses_the_first_append(tmp_path: Path) -> None:
    """The read answered empty misses the other writer's start, and so the append on it is refused."""
    a, b = SqliteLog(tmp_path / "events.db"), SqliteLog(tmp_path / "events.db")
    ta = a.fence("r")
    b.append([Append("r", [(1, "run.started", '{"by":"b"}')], b.fence("r"), created=("wf", None))])
    assert a.read("r") == []  # answered from the fence's mark
    with pytest.raises(FencedError, match="stale"):
        a.append([Append("r", [(1, "run.started", '{"by":"a"}')], ta, created=("wf", None))])
    assert [r[2] for r in a.read("r")] == ['{"by":"b"}']  # nothing of a's was written


def test_a_fences_mark_is_not_used_once_it_is_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fence with no read soon after it: the next read asks the database."""
    from durable.store.log import _fresh

    a, b = SqliteLog(tmp_path / "events.db"), SqliteLog(tmp_path / "events.db")
    a.fence("r")
    b.append([Append("r", [(1, "run.started", "{}")], b.fence("r"), created=("wf", None))])
    monkeypatch.setattr(_fresh, "EMPTY_FOR", 0.0)
    assert [r[:2] for r in a.read("r")] == [(1, "run.started")]


def test_marks_of_fences_no_read_followed_are_dropped() -> None:
    """Fences of runs never read again leave no growing table: expired marks go."""
    from durable.store.log import _fresh

    fresh = _fresh.FreshRuns()
    for i in range(_fresh._PRUNE_AT):
        fresh.mark(f"r{i}")
    fresh._at = dict.fromkeys(fresh._at, 0.0)  # all of them long expired
    fresh.mark("last")
    assert list(fresh._at) == ["last"]
    assert not fresh.read_as_empty("r1") and fresh.read_as_empty("last")
