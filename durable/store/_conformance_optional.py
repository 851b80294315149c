"""The conformance tests of the optional ``EventLog`` methods: ``times``, ``append_each``, ``last_row``.

``EventLogConformance`` inherits them; each test skips itself on a log that
does not have its method. ``rows`` makes the rows every test writes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ..errors import FencedError
from ..events import RUN_COMPLETED, RUN_STARTED, STEP_COMPLETED
from .log._protocol import Append, EventLog, Row

_CLOCK_SLACK = 2.0
"""Seconds a store's clock may differ from this process's in the tests of ``times``."""


def rows(first: int, n: int, kind: str = STEP_COMPLETED) -> list[Row]:
    """``n`` rows with consecutive seqs from ``first``, each with a distinct JSON payload.

    Args:
        first: The first row's seq.
        n: How many rows.
        kind: The rows' event type.
    """
    return [(seq, kind, json.dumps({"n": seq})) for seq in range(first, first + n)]


class OptionalMethodsConformance:
    """The rules of the optional log methods (mixed into ``EventLogConformance``, which gives ``log``)."""

    # -- times (optional) ----------------------------------------------------------

    def _times(self, log: EventLog) -> Any:
        times = getattr(log, "times", None)
        if times is None:
            pytest.skip("this log keeps no row times (the optional times method)")
        return times

    def test_times_say_when_each_row_was_written(self, log: EventLog) -> None:
        """``times`` gives every row of an append the time of its commit, and filters by seq."""
        times = self._times(log)
        token = log.fence("r1")
        before = time.time()
        log.append([Append("r1", rows(1, 2), token, created=("wf", None))])
        middle = time.time()
        log.append([Append("r1", rows(3, 1), token)])  # the one-statement append
        after = time.time()
        got = times("r1")
        assert sorted(got) == [1, 2, 3]
        # The store's clock may be another machine's (a database server): allow it a little drift.
        assert before - _CLOCK_SLACK <= got[1] == got[2] <= middle + _CLOCK_SLACK
        assert got[1] <= got[3] <= after + _CLOCK_SLACK
        assert sorted(times("r1", 2)) == [3]
        assert times("unknown") == {}

    def test_times_follow_compaction_and_deletion(self, log: EventLog) -> None:
        """The snapshot of a compaction has a time of its own; a deleted run has none left."""
        times = self._times(log)
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 3), token, created=("wf", None))])
        before = time.time()
        log.compact("r1", (4, "run.snapshot", '{"state": 1}'), token)
        assert list(times("r1")) == [4]
        assert times("r1")[4] >= before - _CLOCK_SLACK
        log.delete_run("r1")
        assert times("r1") == {}

    # -- grouped appends (optional: ``append_each``) -------------------------------

    def _each(self, log: EventLog) -> Any:
        each = getattr(log, "append_each", None)
        if each is None:
            pytest.skip("this log has no append_each: the engine commits each run alone")
        return each

    def test_append_each_commits_the_appends_of_several_runs(self, log: EventLog) -> None:
        """Starts, steps and ends of several runs in one ``append_each``: all written, each ``None``."""
        each = self._each(log)
        tokens = {r: log.fence(r) for r in ("a", "b", "c")}
        assert each(
            [Append(r, rows(1, 1, RUN_STARTED), t, created=("wf", None)) for r, t in tokens.items()]
        ) == [
            None,
            None,
            None,
        ]
        assert each([Append(r, rows(2, 2), t) for r, t in tokens.items()]) == [None, None, None]
        done = [Append(r, rows(4, 1, RUN_COMPLETED), t, status="completed") for r, t in tokens.items()]
        assert each(done) == [None, None, None]
        for r in tokens:
            assert log.read(r) == rows(1, 1, RUN_STARTED) + rows(2, 2) + rows(4, 1, RUN_COMPLETED)
            info = log.info(r)
            assert info is not None
            assert info.status == "completed"

    def test_append_each_leaves_out_a_stale_append_alone(self, log: EventLog) -> None:
        """A fenced run's append is refused with ``FencedError`` in its place; the others commit."""
        each = self._each(log)
        a, b, c = log.fence("a"), log.fence("b"), log.fence("c")
        log.append(
            [Append(r, rows(1, 1), t, created=("wf", None)) for r, t in (("a", a), ("b", b), ("c", c))]
        )
        newer = log.fence("b")  # another driver took b over
        got = each(
            [
                Append("a", rows(2, 1), a),
                Append("b", rows(2, 1, RUN_COMPLETED), b, status="completed"),
                Append("c", rows(2, 1), c),
            ]
        )
        assert got[0] is None
        assert got[2] is None
        assert isinstance(got[1], FencedError)
        assert log.read("a") == rows(1, 2)
        assert log.read("c") == rows(1, 2)
        assert log.read("b") == rows(1, 1)
        info = log.info("b")
        assert info is not None
        assert info.status == "running"  # the refused append's status change is not written
        log.append([Append("b", rows(2, 1), newer)])  # the new driver goes on
        assert log.read("b") == rows(1, 2)

    def test_append_each_leaves_out_a_taken_seq_and_a_run_started_elsewhere(self, log: EventLog) -> None:
        """A taken seq and a new run another writer started: both refused, nothing of them written."""
        each = self._each(log)
        a, b, c = log.fence("a"), log.fence("b"), log.fence("c")
        log.append([Append("a", rows(1, 2), a, created=("wf", None))])
        theirs = log.fence("c")
        log.append([Append("c", rows(1, 1), theirs, created=("theirs", None))])
        got = each(
            [
                Append("a", rows(2, 1), a),  # seq 2 is taken
                Append("b", rows(1, 1, RUN_STARTED), b, created=("wf", None)),
                Append("c", rows(1, 2, RUN_STARTED), c, created=("wf", "p")),  # c was started by another
            ]
        )
        assert isinstance(got[0], FencedError)
        assert got[1] is None
        assert isinstance(got[2], FencedError)
        assert log.read("a") == rows(1, 2)
        assert log.read("b") == rows(1, 1, RUN_STARTED)
        assert log.read("c") == rows(1, 1)
        info = log.info("c")
        assert info is not None
        assert (info.workflow, info.parent_run_id) == ("theirs", None)

    def test_append_each_answers_in_the_order_it_was_given(self, log: EventLog) -> None:
        """Appends not in run-id order, one of them fenced: each outcome stands in its append's place."""
        each = self._each(log)
        tokens = {r: log.fence(r) for r in ("c", "a", "b")}
        log.append([Append(r, rows(1, 1), t, created=("wf", None)) for r, t in tokens.items()])
        log.fence("a")  # another driver took a over
        got = each([Append(r, rows(2, 1, RUN_COMPLETED), t, status="completed") for r, t in tokens.items()])
        assert got[0] is None
        assert isinstance(got[1], FencedError)
        assert got[2] is None
        ended = rows(1, 1) + rows(2, 1, RUN_COMPLETED)
        assert [log.read(r) for r in ("c", "a", "b")] == [ended, rows(1, 1), ended]
        statuses = [log.info(r) for r in ("c", "a", "b")]
        assert [i.status if i is not None else None for i in statuses] == [
            "completed",
            "running",
            "completed",
        ]

    def test_append_each_takes_an_append_that_both_creates_and_ends_its_run(self, log: EventLog) -> None:
        """An append that starts its run and ends it, beside another run's: both written, the status set."""
        each = self._each(log)
        a, b = log.fence("a"), log.fence("b")
        done = rows(1, 1, RUN_STARTED) + rows(2, 1, RUN_COMPLETED)
        got = each(
            [
                Append("a", rows(1, 1, RUN_STARTED), a, created=("wf", None)),
                Append("b", done, b, "completed", ("wf", "a")),
            ]
        )
        assert got == [None, None]
        assert log.read("a") == rows(1, 1, RUN_STARTED)
        assert log.read("b") == done
        info = log.info("b")
        assert info is not None
        assert (info.status, info.workflow, info.parent_run_id) == ("completed", "wf", "a")

    def test_last_row_is_the_row_with_the_highest_seq(self, log: EventLog) -> None:
        """``last_row`` (optional): the run's newest row; ``None`` for a run without rows."""
        last = getattr(log, "last_row", None)
        if last is None:
            pytest.skip("this log has no last_row: an ended run's outcome is read from its whole log")
        assert last("r1") is None
        token = log.fence("r1")
        assert last("r1") is None  # fenced only
        log.append([Append("r1", rows(1, 3), token, created=("wf", None))])
        log.append([Append("r1", rows(4, 1, RUN_COMPLETED), token, status="completed")])
        assert last("r1") == rows(4, 1, RUN_COMPLETED)[0]
        log.compact("r1", (5, "run.snapshot", "{}"), token)
        assert last("r1") == (5, "run.snapshot", "{}")
