"""The conformance suite of ``EventLog``: the rules every log backend keeps, as pytest tests.

A backend author subclasses ``EventLogConformance`` in a test module and
says how to open the backend; pytest then runs every rule against it.
``MemoryLog`` and ``SqliteLog`` pass the same suite in durable's own tests.
It needs pytest (``pip install pytest``).

Example::

    # tests/test_my_log.py
    from pathlib import Path

    from durable.store import EventLog
    from durable.store.conformance import EventLogConformance

    from my_backend import MyLog


    class TestMyLog(EventLogConformance):
        def open_log(self, where: Path) -> EventLog:
            return MyLog(where / "events")

For readable failures, add ``pytest.register_assert_rewrite("durable.store.conformance",
"durable.store._conformance_optional")`` to your ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..errors import FencedError
from ..events import RUN_COMPLETED, RUN_STARTED, STEP_COMPLETED
from ._conformance_optional import OptionalMethodsConformance, rows
from .log._protocol import Append, EventLog

__all__ = ["PROTOCOL_METHODS", "EventLogConformance", "rows"]

PROTOCOL_METHODS = (
    "append",
    "read",
    "iter_rows",
    "info",
    "runs",
    "count",
    "fence",
    "compact",
    "delete_run",
    "integrity_check",
    "vacuum",
    "close",
)
"""Every method of ``EventLog``."""


class EventLogConformance(OptionalMethodsConformance):
    """The rules of ``EventLog`` as tests; subclass it as ``Test<YourLog>`` and define ``open_log``.

    The tests of the optional methods (``times``, ``append_each``,
    ``last_row``) come from ``OptionalMethodsConformance``; each skips
    itself on a log without its method.

    Attributes:
        reopens: Whether ``open_log`` called again with the same folder opens a
            new instance over the same stored data (``False`` for a log that
            lives in its object, such as ``MemoryLog``: that test is skipped).
    """

    reopens: bool = True

    def open_log(self, where: Path) -> EventLog:
        """Open the backend with its storage under ``where`` (an empty folder per test).

        Args:
            where: The test's own folder; called again with the same folder it
                must open the same stored data (unless ``reopens`` is ``False``).
        """
        raise NotImplementedError("define open_log(self, where) in your conformance test class")

    @pytest.fixture
    def where(self, tmp_path: Path) -> Path:
        """The folder the test's log lives under."""
        return tmp_path

    @pytest.fixture
    def log(self, where: Path) -> Iterator[EventLog]:
        """A log over fresh storage, closed after the test."""
        opened = self.open_log(where)
        yield opened
        opened.close()

    # -- the protocol -----------------------------------------------------------

    def test_every_protocol_method_is_there(self, log: EventLog) -> None:
        """The backend has every method of ``EventLog``, callable."""
        missing = [m for m in PROTOCOL_METHODS if not callable(getattr(log, m, None))]
        assert missing == [], f"missing EventLog methods: {missing}"

    # -- appending and reading --------------------------------------------------

    def test_append_then_read_returns_rows_in_seq_order(self, log: EventLog) -> None:
        """Rows appended in several appends read back whole, in seq order, with gap-free seqs."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 1, RUN_STARTED), token, created=("wf", None))])
        log.append([Append("r1", rows(2, 3), token)])
        log.append([Append("r1", rows(5, 2), token)])
        got = log.read("r1")
        assert got == rows(1, 1, RUN_STARTED) + rows(2, 3) + rows(5, 2)
        assert [r[0] for r in got] == list(range(1, 7))

    def test_an_unsynced_append_is_written_like_any_other(self, log: EventLog) -> None:
        """``sync=False`` relaxes only power-loss durability: the rows are there, in order."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 1, RUN_STARTED), token, created=("wf", None))])
        log.append([Append("r1", rows(2, 2), token)], sync=False)
        log.append([Append("r1", rows(4, 1), token)])
        assert log.read("r1") == rows(1, 1, RUN_STARTED) + rows(2, 2) + rows(4, 1)

    def test_read_after_seq_returns_only_later_rows(self, log: EventLog) -> None:
        """``read(run_id, after_seq)`` returns the rows with a greater seq only."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 5), token, created=("wf", None))])
        assert log.read("r1", after_seq=3) == rows(4, 2)
        assert log.read("r1", after_seq=5) == []
        assert log.read("r1", 0) == rows(1, 5)

    def test_read_of_an_unknown_run_is_empty(self, log: EventLog) -> None:
        """Reading a run the log never saw returns no rows and no summary."""
        assert log.read("nobody") == []
        assert list(log.iter_rows("nobody")) == []
        assert log.info("nobody") is None

    def test_iter_rows_yields_what_read_returns(self, log: EventLog) -> None:
        """``iter_rows`` yields the same rows as ``read``, honouring ``after_seq``."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 50), token, created=("wf", None))])
        assert list(log.iter_rows("r1")) == log.read("r1") == rows(1, 50)
        assert list(log.iter_rows("r1", 40)) == log.read("r1", 40) == rows(41, 10)

    def test_an_abandoned_row_iterator_does_not_block_writes(self, log: EventLog) -> None:
        """A writer can append while an ``iter_rows`` iterator is left half consumed."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 10), token, created=("wf", None))])
        it = log.iter_rows("r1")
        assert next(it) == rows(1, 1)[0]
        log.append([Append("r1", rows(11, 1), token)])
        assert log.read("r1", 10) == rows(11, 1)

    def test_a_batch_over_two_runs_commits_both(self, log: EventLog) -> None:
        """One append batch writes the rows and summaries of several runs together."""
        parent, child = log.fence("p"), log.fence("c")
        log.append(
            [
                Append("p", rows(1, 2), parent, created=("outer", None)),
                Append("c", rows(1, 1), child, created=("inner", "p")),
            ]
        )
        assert log.read("p") == rows(1, 2)
        assert log.read("c") == rows(1, 1)
        info = log.info("c")
        assert info is not None
        assert info.parent_run_id == "p"

    def test_a_batch_with_a_stale_token_writes_nothing(self, log: EventLog) -> None:
        """When one append of a batch is fenced, no append of the batch is written."""
        token = log.fence("a")
        stale = log.fence("b")
        log.fence("b")
        with pytest.raises(FencedError):
            log.append(
                [
                    Append("a", rows(1, 2), token, created=("wf", None)),
                    Append("b", rows(1, 1), stale, created=("wf", None)),
                ]
            )
        assert log.read("a") == []
        assert log.read("b") == []
        assert log.info("a") is None

    def test_a_batch_with_a_taken_seq_writes_nothing(self, log: EventLog) -> None:
        """When one append names a seq already stored, the whole batch is refused."""
        a, b = log.fence("a"), log.fence("b")
        log.append([Append("b", rows(1, 2), b, created=("wf", None))])
        with pytest.raises(FencedError):
            log.append([Append("a", rows(1, 1), a, created=("wf", None)), Append("b", rows(2, 1), b)])
        assert log.read("a") == []
        assert log.read("b") == rows(1, 2)

    def test_a_duplicate_seq_is_refused(self, log: EventLog) -> None:
        """A second write of a stored seq raises ``FencedError`` and leaves the stored row."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 3), token, created=("wf", None))])
        with pytest.raises(FencedError):
            log.append([Append("r1", [(3, STEP_COMPLETED, '{"other": true}')], token)])
        with pytest.raises(FencedError):
            log.append([Append("r1", [(1, STEP_COMPLETED, "{}"), (2, STEP_COMPLETED, "{}")], token)])
        assert log.read("r1") == rows(1, 3)

    # -- fencing ------------------------------------------------------------------

    def test_fence_hands_out_growing_tokens(self, log: EventLog) -> None:
        """Every ``fence`` of a run returns a token greater than the ones before."""
        tokens = [log.fence("r1") for _ in range(4)]
        assert tokens == sorted(tokens)
        assert len(set(tokens)) == 4

    def test_a_stale_writer_is_refused(self, log: EventLog) -> None:
        """After a new fence, the older token's appends raise ``FencedError`` and write nothing."""
        old = log.fence("r1")
        log.append([Append("r1", rows(1, 1), old, created=("wf", None))])
        new = log.fence("r1")
        with pytest.raises(FencedError):
            log.append([Append("r1", rows(2, 1), old)])
        with pytest.raises(FencedError):
            log.append([Append("r1", rows(2, 1), old, status="failed")])
        log.append([Append("r1", rows(2, 1), new)])
        assert log.read("r1") == rows(1, 2)
        info = log.info("r1")
        assert info is not None
        assert info.status == "running"

    def test_fencing_one_run_leaves_the_others_writable(self, log: EventLog) -> None:
        """A token belongs to one run: fencing another run does not make it stale."""
        a = log.fence("a")
        log.fence("b")
        log.fence("b")
        log.append([Append("a", rows(1, 1), a, created=("wf", None))])
        assert log.read("a") == rows(1, 1)

    # -- summaries --------------------------------------------------------------

    def test_created_starts_a_running_summary(self, log: EventLog) -> None:
        """An append with ``created`` gives the run a ``RunInfo`` with status ``running``."""
        token = log.fence("r1")
        assert log.info("r1") is None  # fenced only: no summary yet
        log.append([Append("r1", rows(1, 1), token, created=("wf", None))])
        info = log.info("r1")
        assert info is not None
        assert (info.run_id, info.workflow, info.status, info.parent_run_id) == ("r1", "wf", "running", None)
        assert info.updated_at >= info.created_at > 0

    def test_status_changes_with_the_rows_that_change_it(self, log: EventLog) -> None:
        """An append with ``status`` sets the run's status and its ``updated_at``."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 1), token, created=("wf", None))])
        before = log.info("r1")
        log.append([Append("r1", rows(2, 1, RUN_COMPLETED), token, status="completed")])
        after = log.info("r1")
        assert before is not None
        assert after is not None
        assert after.status == "completed"
        assert after.created_at == before.created_at
        assert after.updated_at >= before.updated_at

    def test_runs_lists_newest_first_and_filters(self, log: EventLog) -> None:
        """``runs`` lists newest first (ties by run id, descending) and filters by status and workflow."""
        for run_id, workflow in (("a", "one"), ("b", "two"), ("c", "one")):
            token = log.fence(run_id)
            log.append([Append(run_id, rows(1, 1), token, created=(workflow, None))])
        log.append([Append("b", rows(2, 1), log.fence("b"), status="failed")])
        log.fence("only-fenced")
        assert [i.run_id for i in log.runs()] == ["c", "b", "a"]
        assert [i.run_id for i in log.runs(workflow="one")] == ["c", "a"]
        assert [i.run_id for i in log.runs(status="failed")] == ["b"]
        assert [i.run_id for i in log.runs(status="running", workflow="two")] == []
        assert [i.run_id for i in log.runs(limit=2)] == ["c", "b"]
        assert [i.run_id for i in log.runs(limit=2, offset=2)] == ["a"]
        assert [i.run_id for i in log.runs(offset=1)] == ["b", "a"]

    def test_runs_pages_by_key_and_counts_what_it_filters(self, log: EventLog) -> None:
        """``runs(before=...)`` continues after a page's last run; ``count`` counts what ``runs`` lists."""
        for run_id, workflow in (("a", "one"), ("b", "two"), ("c", "one"), ("d", "one")):
            token = log.fence(run_id)
            log.append([Append(run_id, rows(1, 1), token, created=(workflow, None))])
        log.append([Append("b", rows(2, 1), log.fence("b"), status="failed")])
        log.fence("only-fenced")
        first = log.runs(limit=2)
        assert [i.run_id for i in first] == ["d", "c"]
        last = first[-1]
        assert [i.run_id for i in log.runs(limit=2, before=(last.created_at, last.run_id))] == ["b", "a"]
        assert [i.run_id for i in log.runs(workflow="one", before=(last.created_at, last.run_id))] == ["a"]
        assert (log.count(), log.count(workflow="one"), log.count(status="failed")) == (4, 3, 1)
        assert log.count(status="completed", workflow="two") == 0

    def test_a_run_s_summary_keeps_the_code_its_first_append_gave(self, log: EventLog) -> None:
        """The ``code`` of the append that starts a run is in its summary, in ``info`` and ``runs``."""
        log.append([Append("a", rows(1, 1), log.fence("a"), created=("wf", None), code="sha256:abc")])
        log.append([Append("b", rows(1, 1), log.fence("b"), created=("wf", None))])
        log.append([Append("a", rows(2, 1), log.fence("a"), status="completed")])
        info = log.info("a")
        assert info is not None
        assert info.code == "sha256:abc"
        assert {i.run_id: i.code for i in log.runs()} == {"a": "sha256:abc", "b": None}

    # -- compaction and deletion ---------------------------------------------------

    def test_compact_keeps_only_the_snapshot(self, log: EventLog) -> None:
        """``compact`` leaves the snapshot as the run's only row; later appends follow it."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 5), token, created=("wf", None))])
        snapshot = (6, "run.snapshot", '{"state": 1}')
        log.compact("r1", snapshot, token)
        assert log.read("r1") == [snapshot]
        log.append([Append("r1", rows(7, 2), token)])
        assert log.read("r1") == [snapshot, *rows(7, 2)]
        assert log.read("r1", 6) == rows(7, 2)
        assert log.integrity_check() == "ok"

    def test_compact_with_a_stale_token_changes_nothing(self, log: EventLog) -> None:
        """A fenced compaction raises ``FencedError`` and keeps every row."""
        old = log.fence("r1")
        log.append([Append("r1", rows(1, 3), old, created=("wf", None))])
        log.fence("r1")
        with pytest.raises(FencedError):
            log.compact("r1", (4, "run.snapshot", "{}"), old)
        assert log.read("r1") == rows(1, 3)

    def test_compact_onto_a_taken_seq_changes_nothing(self, log: EventLog) -> None:
        """A snapshot whose seq is already stored raises ``FencedError`` and keeps every row."""
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 3), token, created=("wf", None))])
        with pytest.raises(FencedError):
            log.compact("r1", (3, "run.snapshot", "{}"), token)
        assert log.read("r1") == rows(1, 3)

    def test_delete_run_removes_rows_summary_and_token(self, log: EventLog) -> None:
        """After ``delete_run`` the run is unknown and can start again; other runs stay."""
        for run_id in ("gone", "kept"):
            token = log.fence(run_id)
            log.append([Append(run_id, rows(1, 2), token, created=("wf", None))])
        log.delete_run("gone")
        log.delete_run("never-existed")
        assert log.read("gone") == []
        assert log.info("gone") is None
        assert [i.run_id for i in log.runs()] == ["kept"]
        assert log.read("kept") == rows(1, 2)
        again = log.fence("gone")
        log.append([Append("gone", rows(1, 1), again, created=("wf", None))])
        assert log.read("gone") == rows(1, 1)

    # -- maintenance ------------------------------------------------------------

    def test_integrity_check_of_a_sound_log_is_ok(self, log: EventLog) -> None:
        """A log written only through the protocol passes its own integrity check."""
        assert log.integrity_check() == "ok"
        token = log.fence("r1")
        log.append([Append("r1", rows(1, 3), token, created=("wf", None))])
        log.delete_run("r1")
        assert log.integrity_check() == "ok"

    def test_vacuum_keeps_every_live_row(self, log: EventLog) -> None:
        """``vacuum`` after deleting and compacting keeps the other runs readable and writable."""
        for run_id in ("gone", "kept", "compacted"):
            token = log.fence(run_id)
            log.append([Append(run_id, rows(1, 20), token, created=("wf", None))])
        log.delete_run("gone")
        token = log.fence("compacted")
        log.compact("compacted", (21, "run.snapshot", "{}"), token)
        log.vacuum()
        assert log.read("kept") == rows(1, 20)
        assert log.read("compacted") == [(21, "run.snapshot", "{}")]
        log.append([Append("compacted", rows(22, 1), token)])
        assert log.integrity_check() == "ok"

    # -- storage that outlives the instance -------------------------------------------

    def test_a_new_runs_first_append_is_fenced_by_a_writer_that_came_between(
        self, log: EventLog, where: Path
    ) -> None:
        """A new run fenced, then fenced and started by another instance: the first writer is refused."""
        if not self.reopens:
            pytest.skip("this log lives in its object: nothing outlives the instance")
        first = log.fence("r1")  # the run is new to both instances
        second = self.open_log(where)
        try:
            theirs = second.fence("r1")
            second.append([Append("r1", rows(1, 1), theirs, created=("wf", None))])
            with pytest.raises(FencedError):
                log.append([Append("r1", rows(1, 2), first, created=("wf", "parent"))])
            with pytest.raises(FencedError):
                log.append([Append("r1", rows(2, 1), first)])
            assert log.read("r1") == rows(1, 1)
            info = log.info("r1")
            assert info is not None
            assert (info.workflow, info.parent_run_id) == ("wf", None)
            second.append([Append("r1", rows(2, 1), theirs)])
            assert second.read("r1") == rows(1, 2)
        finally:
            second.close()

    def test_a_fresh_instance_sees_everything(self, log: EventLog, where: Path) -> None:
        """A second instance over the same storage reads rows, summaries and tokens of the first."""
        if not self.reopens:
            pytest.skip("this log lives in its object: nothing outlives the instance")
        old = log.fence("r1")
        log.append([Append("r1", rows(1, 3), old, created=("wf", "parent"))])
        log.append([Append("r1", rows(4, 1, RUN_COMPLETED), old, status="completed")])
        second = self.open_log(where)
        try:
            stored = rows(1, 3) + rows(4, 1, RUN_COMPLETED)
            assert second.read("r1") == stored
            assert list(second.iter_rows("r1", 2)) == stored[2:]
            info = second.info("r1")
            assert info is not None
            assert (info.workflow, info.status, info.parent_run_id) == ("wf", "completed", "parent")
            assert [i.run_id for i in second.runs()] == ["r1"]
            new = second.fence("r1")
            assert new > old
            with pytest.raises(FencedError):
                log.append([Append("r1", rows(5, 1), old)])  # the first instance is fenced out
            second.append([Append("r1", rows(5, 1), new)])
            assert log.read("r1") == [*stored, *rows(5, 1)]
        finally:
            second.close()
