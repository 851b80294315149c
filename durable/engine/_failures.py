"""Failures as the log records them, and rebuilt on replay.

A failure is recorded by type name, message and (when they are plain JSON)
its arguments. Rebuilding only considers exception types already imported,
so a log can never make a process import, and so run, code.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import (
    BudgetExhaustedError,
    CapabilityDriftError,
    CompensationFailedError,
    ConfigurationError,
    DurableError,
    MaxVisitsExceededError,
    NondeterminismError,
    NonRetryableError,
    SerializationError,
    StepFailedError,
    StepTimeoutError,
    UnknownCommitError,
)


def recordable(exc: BaseException) -> bool:
    """Whether a failure is the code's own outcome (recorded) or a condition to fix (not)."""
    if not isinstance(exc, Exception):
        return False
    if isinstance(exc, DurableError):
        return isinstance(exc, StepFailedError | NonRetryableError | StepTimeoutError)
    return True


def error_type(exc: BaseException) -> str:
    """The qualified name of an exception's type, as the log records it."""
    t = type(exc)
    return f"{t.__module__}.{t.__qualname__}"


def error_data(exc: BaseException) -> dict[str, Any]:
    """How the log records a failure: type, message and (when plain JSON) the arguments."""
    data: dict[str, Any] = {"error_type": error_type(exc), "error_message": str(exc)}
    if all(isinstance(a, str | int | float | bool) or a is None for a in exc.args):
        data["error_args"] = list(exc.args)
    return data


def rebuild_from(data: dict[str, Any], *, run_id: str | None, path: str | None) -> Exception:
    """``rebuild_error`` over a recorded failure's data."""
    return rebuild_error(
        data.get("error_type") or "Exception",
        data.get("error_message") or "",
        run_id=run_id,
        path=path,
        args=data.get("error_args"),
    )


def recorded_run_failure(data: dict[str, Any], run_id: str) -> Exception:
    """A failed run's recorded failure, re-raised by a call without ``retry_failed=True``.

    It keeps its own type and message (code that catches it still does), with
    a note that says the failure comes from the log and how to run the work again.
    """
    path = data.get("path")
    exc = rebuild_from(data, run_id=run_id, path=path)
    at = f" at {path!r}" if path else ""
    exc.add_note(
        f"durable: run {run_id!r} failed earlier{at} and the log recorded that failure; this "
        "call re-raised it without running anything. Fix the cause, then call run_workflow(..., "
        f"run_id={run_id!r}, retry_failed=True) to run the failed work again (what committed "
        "stays committed), or start the work under a new run_id."
    )
    return exc


def rebuild_error(
    type_name: str, message: str, *, run_id: str | None, path: str | None, args: list[Any] | None = None
) -> Exception:
    """The recorded failure as its own type when that is safe, else ``StepFailedError``.

    Only types already imported are considered, so a log can never make this
    process import (and run) code.
    """
    module, _, qual = type_name.rpartition(".")
    cls = getattr(sys.modules.get(module), qual, None) if "." not in qual else None
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, DurableError):
        try:
            return cls(*args) if args is not None else cls(message)
        except Exception:
            pass
    if cls in (
        NonRetryableError,
        StepTimeoutError,
        ConfigurationError,
        SerializationError,
        NondeterminismError,
    ):
        return cls(message, run_id=run_id, path=path)  # type: ignore[no-any-return]
    if cls is MaxVisitsExceededError:
        return MaxVisitsExceededError(message, run_id=run_id, path=path or "", step=path or "", limit=0)
    if cls is UnknownCommitError:
        return UnknownCommitError(message, run_id=run_id, key=path or "")
    if cls is BudgetExhaustedError:
        return BudgetExhaustedError(message, run_id=run_id, path=path)
    if cls is CompensationFailedError:
        return CompensationFailedError(message, run_id=run_id, key=path or "")
    if cls is CapabilityDriftError:
        return CapabilityDriftError(message, run_id=run_id, changes=[])
    return StepFailedError(
        f"{path or 'run'} failed earlier in run {run_id!r} with {type_name}: {message}",
        run_id=run_id,
        path=path,
        error_type=type_name,
        error_message=message,
    )
