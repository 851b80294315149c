"""How a failed run ends: its compensations first, then ``run.failed``.

A failure is *final* (``final_failure``) unless it waits for a person's
decision (an unknown commit, nondeterminism, a spent budget, a compensation
that failed) or only cut the drive (a store that cannot be written, a newer
driver, a stop). The runner runs the compensations of the confirmed calls,
then records ``run.failed`` for every final failure the run's code raised
but drift (``fails_run``), whoever drives it: a worker, or ``run_workflow``
in the calling process. A runtime's driver records the end itself for a
final failure that its drive raised otherwise (drift, a recorded input the
code no longer accepts), and for a drive cut between its compensations and
its end. Both record it with
``record_run_failed``, which names the compensations the log confirms.
"""

from __future__ import annotations

import contextlib

from .._logging import ERROR, INFO, note
from ..errors import (
    BudgetExhaustedError,
    CapabilityDriftError,
    CompensationFailedError,
    FencedError,
    LogUnavailableError,
    NondeterminismError,
    UnknownCommitError,
)
from ..events import RUN_FAILED
from . import _event_writer as ev
from ._compensation import compensate, compensated_keys
from ._context import RunContext
from ._failures import error_data
from ._spec import Spec

AWAITS_DECISION = (UnknownCommitError, NondeterminismError, BudgetExhaustedError, CompensationFailedError)
"""The failures that leave a run ``blocked`` until a person decides (never final)."""


def final_failure(exc: BaseException) -> bool:
    """Whether ``exc`` ends the run ``failed`` (its compensations run first).

    Not final: a failure that waits for a person (``AWAITS_DECISION``), and
    one that only cut the drive (the log unavailable, a newer driver, a stop
    or a process exit, which are not ``Exception``).
    """
    if not isinstance(exc, Exception):
        return False
    return not isinstance(exc, (*AWAITS_DECISION, LogUnavailableError, FencedError))


def fails_run(exc: BaseException) -> bool:
    """Whether the runner records ``exc``, raised by the run's code, as the run's ``run.failed``.

    Every final failure but drift: drift says the caller's code does not match
    the log, and the caller decides (accept it, or run code that matches); a
    runtime's driver, which has no caller to tell, records it with its keys.
    """
    return final_failure(exc) and not isinstance(exc, CapabilityDriftError)


def record_run_failed(run: RunContext, exc: BaseException, compensated: list[str] | None = None) -> None:
    """Append ``run.failed`` for ``exc`` with the compensations that ran, and flush it.

    ``compensated``: those this drive confirmed; ``None``: those the run's log confirms
    (an end recorded after the drive that ran them).
    """
    data = error_data(exc)
    drift = getattr(exc, "changes", None)
    if drift is not None:  # a CapabilityDriftError: rebuilt from its message, the keys kept apart
        data["error_args"] = None
        data["drift_keys"] = [c.key for c in drift]
    done = compensated_keys(run.recorded.receipts) if compensated is None else compensated
    run.emit(RUN_FAILED, ev.run_failed(data, getattr(exc, "path", None), done))
    run.flush(status="failed")


async def compensate_before_end(run: RunContext, workflow: Spec, exc: BaseException) -> list[str]:
    """Run the compensations of the confirmed calls before the run's end is recorded.

    A compensation that cannot finish raises its own error from ``exc``: the
    run's end is then not recorded, and the runtime blocks it.
    """
    try:
        return await compensate(run, workflow)
    except BaseException as failed:
        raise failed from exc


def close_failed(run: RunContext, exc: BaseException, compensated: list[str]) -> bool:
    """Make buffered outcomes durable and, when ``exc`` ends the run (``fails_run``), record ``run.failed``.

    Returns whether ``run.failed`` was recorded.
    """
    failed = False
    with contextlib.suppress(BaseException):
        if fails_run(exc):
            path = getattr(exc, "path", None)
            record_run_failed(run, exc, compensated)
            failed = True
            note(
                ERROR,
                run.run_id,
                path,
                "run %s failed: %s: %s",
                run.run_id,
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
                error_type=type(exc).__name__,
            )
        else:
            run.flush()
            note(
                INFO,
                run.run_id,
                getattr(exc, "path", None),
                "run %s stopped: %s: %s",
                run.run_id,
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
                error_type=type(exc).__name__,
            )
    return failed
