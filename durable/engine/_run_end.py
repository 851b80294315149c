"""How a failed run ends: its compensations first, then ``run.failed`` for the code's own failures.

The runner calls these when a workflow body raises; what a drive that ends
without a recorded outcome means is the runtime's business (``runtime._outcome``).
"""

from __future__ import annotations

import contextlib

from .._logging import ERROR, INFO, note
from ..errors import SerializationError
from ..events import RUN_FAILED
from . import _event_writer as ev
from ._compensation import compensate
from ._context import RunContext
from ._failures import error_data, recordable


def fails_for_good(exc: BaseException) -> bool:
    """Whether ``exc`` ends the run as ``failed`` (the code's own failure, recorded)."""
    return recordable(exc) and not isinstance(exc, SerializationError)


async def compensate_before_end(run: RunContext, exc: BaseException) -> list[str]:
    """Run the compensations of the confirmed calls before the run's end is recorded.

    A compensation that cannot finish raises its own error from ``exc``: the
    run's end is then not recorded, and the runtime blocks it.
    """
    if not run.compensations:
        return []
    run.flush()  # the outcomes that led here are durable before anything is undone
    try:
        return await compensate(run)
    except BaseException as failed:
        raise failed from exc


def close_failed(run: RunContext, exc: BaseException, compensated: list[str]) -> bool:
    """Make buffered outcomes durable and, for the code's own failures, record ``run.failed``.

    Returns whether ``run.failed`` was recorded.
    """
    failed = False
    with contextlib.suppress(BaseException):
        if fails_for_good(exc):
            path = getattr(exc, "path", None)
            run.emit(RUN_FAILED, ev.run_failed(error_data(exc), path, compensated))
            run.flush(status="failed")
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
