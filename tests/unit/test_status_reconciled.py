"""A run's status from its log's status and its control record: the one reconciliation (pure)."""

from __future__ import annotations

import pytest

from durable.runtime._status import reconciled
from durable.store import ControlRecord


def _rec(state: str, resume: str | None = None) -> ControlRecord:
    return ControlRecord("r1", "wf", state=state, resume=resume)


@pytest.mark.parametrize(
    ("state", "status"), [("enqueued", "enqueued"), ("claimed", "running"), ("done", "failed")]
)
def test_a_run_that_never_started_reports_its_record_s_state(state: str, status: str) -> None:
    """Without a log, a claimed record is running, a done one failed, any other state is itself."""
    assert reconciled(None, _rec(state)) == status


def test_a_resume_asked_of_a_stopped_run_reports_the_record_until_the_log_catches_up() -> None:
    """A cancelled run that resume_run put back on its queue is enqueued, then running once claimed."""
    assert reconciled("cancelled", _rec("enqueued", resume="cancelled")) == "enqueued"
    assert reconciled("cancelled", _rec("claimed", resume="cancelled")) == "running"


def test_a_running_run_whose_record_is_blocked_or_requeued_reports_the_record() -> None:
    """The log says running; a blocked record makes it blocked, an enqueued one (answered) enqueued."""
    assert reconciled("running", _rec("blocked")) == "blocked"
    assert reconciled("running", _rec("enqueued")) == "enqueued"


def test_a_finished_run_reports_its_log_whatever_its_record_says() -> None:
    """A completed log wins over a record that still says claimed (its driver has not let go yet)."""
    assert reconciled("completed", _rec("claimed")) == "completed"
    assert reconciled("failed", None) == "failed"
