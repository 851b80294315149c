"""Errors raised by durable.

Every error says what happened, which run and path it concerns, and what the
caller can do next. The tree::

    DurableError(Exception)
    ├── ConfigurationError          misuse found at decoration or call time
    ├── SerializationError          a value that JSON through pydantic cannot hold
    ├── NondeterminismError         the code took another path than the log recorded
    ├── MaxVisitsExceededError      a step entered more often than max_visits allows
    ├── UnknownCommitError          an effect may have happened; nothing can confirm it
    ├── BudgetExhaustedError        a model call was refused: the run's budget is spent
    ├── CompensationFailedError     a compensate= tool failed for good: a person must look
    ├── StepFailedError             a recorded failure that could not be rebuilt as its type
    ├── NonRetryableError           raise it from user code to stop retries at once
    ├── RunFailedError              a run cannot start or resume as asked (cause_code, reason)
    │   └── RunInputMismatchError   the run id names a run started with another input
    ├── RunNotFoundError            no run with that id in this world
    ├── RunFinishedError            the run has finished: it can take no message
    ├── CapabilityDriftError        the code or configuration changed under a resumed run
    ├── ArtifactIntegrityError      an artifact's payload no longer matches its hash
    ├── DataDirectoryError          a folder or file of a data directory is a link (it would lead out)
    ├── CheckpointNotFoundError     no checkpoint with that seq in the run
    ├── LogCorruptedError           the log file is damaged or is not a durable log
    ├── LogFormatError              the log was written by an incompatible SDK
    ├── LogUnavailableError         the log cannot be written now (locked too long, disk full)
    ├── CodecError                  an encrypted payload cannot be decrypted (moved, edited)
    │   └── KeyMismatchError        the world's key is missing or is not the one the data needs
    ├── MemoryStoreError            misuse of the memory store (dimension, filter, extra)
    ├── OuterLoopError              an outer-loop manifest cannot be read
    ├── RunTimeoutError             run_workflow's own timeout passed; the run stays resumable
    ├── RunCancelledError           the run was cancelled (result() of a cancelled run)
    ├── RunBlockedError             the run waits for a person's decision (reason, cause, fixes)
    └── StepTimeoutError            one attempt of a step with timeout= took too long

    DurableControl(BaseException)   control flow user code must not swallow
    ├── RunCancelled                the run was cancelled (handle.cancel(), a deadline)
    ├── FencedError                 a newer driver took the run; this one must stop
    └── RunInterrupted              the run waits for an answer (durable.interrupt)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "ArtifactIntegrityError",
    "BudgetExhaustedError",
    "CapabilityDriftError",
    "CheckpointNotFoundError",
    "CodecError",
    "CompensationFailedError",
    "ConfigurationError",
    "DataDirectoryError",
    "DriftChange",
    "DurableControl",
    "DurableError",
    "FencedError",
    "KeyMismatchError",
    "LogCorruptedError",
    "LogFormatError",
    "LogUnavailableError",
    "MaxVisitsExceededError",
    "MemoryStoreError",
    "NonRetryableError",
    "NondeterminismError",
    "OuterLoopError",
    "RunBlockedError",
    "RunCancelled",
    "RunCancelledError",
    "RunFailedError",
    "RunFinishedError",
    "RunInputMismatchError",
    "RunInterrupted",
    "RunNotFoundError",
    "RunTimeoutError",
    "SerializationError",
    "StepFailedError",
    "StepTimeoutError",
    "UnknownCommitError",
]


class DurableError(Exception):
    """Base class of every error that durable raises.

    Attributes:
        run_id: The run the error concerns, when there is one.
        path: The step path or effect key the error concerns, when there is one.
    """

    run_id: str | None = None
    path: str | None = None

    def __init__(self, message: str, *, run_id: str | None = None, path: str | None = None):
        super().__init__(message)
        self.run_id = run_id
        self.path = path


class ConfigurationError(DurableError):
    """A decorator or an API was used in a way that cannot work (found early)."""


class SerializationError(DurableError):
    """A value cannot be stored as JSON through pydantic; the log was left unchanged."""


class NondeterminismError(DurableError):
    """The code made a different durable call than the one the log recorded there.

    Attributes:
        recorded: What the log holds at that position (``None`` when nothing).
        attempted: What the code tried to call there.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        path: str | None = None,
        recorded: dict[str, Any] | None = None,
        attempted: dict[str, Any] | None = None,
    ):
        super().__init__(message, run_id=run_id, path=path)
        self.recorded = recorded
        self.attempted = attempted


class MaxVisitsExceededError(DurableError):
    """A step was entered more often in one scope than its ``max_visits`` allows.

    Attributes:
        step: The step's name.
        limit: The ``max_visits`` it was declared with.
    """

    def __init__(self, message: str, *, run_id: str | None, path: str, step: str, limit: int):
        super().__init__(message, run_id=run_id, path=path)
        self.step = step
        self.limit = limit


class UnknownCommitError(DurableError):
    """An effect's intent is in the log but its receipt is not.

    The effect may or may not have happened; a tool that is neither
    ``idempotent=True`` nor has ``reconcile=`` cannot be called again safely.

    Attributes:
        key: The idempotency key of the unconfirmed effect.
    """

    def __init__(self, message: str, *, run_id: str | None, key: str):
        super().__init__(message, run_id=run_id, path=key)
        self.key = key


class BudgetExhaustedError(DurableError):
    """A model call did not execute: its run's budget (``durable.Budget``) is spent.

    Under the runtime the run becomes ``blocked`` with reason ``budget``;
    ``durable.resume_run(run_id, world=..., budget=...)`` raises the budget.

    Attributes:
        limit: The limit reached: ``max_model_calls``, ``max_tokens`` or ``max_cost``.
    """

    def __init__(self, message: str, *, run_id: str | None, path: str | None, limit: str = ""):
        super().__init__(message, run_id=run_id, path=path)
        self.limit = limit


class CompensationFailedError(DurableError):
    """The ``compensate=`` tool of a confirmed call failed for good; the run is ``blocked``.

    Attributes:
        key: The compensation's effect key, ``compensate:<original key>``.
    """

    def __init__(self, message: str, *, run_id: str | None, key: str):
        super().__init__(message, run_id=run_id, path=key)
        self.key = key


class StepFailedError(DurableError):
    """A recorded failure whose original exception type could not be rebuilt.

    Attributes:
        error_type: The qualified name of the original exception type.
        error_message: The original message.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None,
        path: str | None,
        error_type: str,
        error_message: str,
    ):
        super().__init__(message, run_id=run_id, path=path)
        self.error_type = error_type
        self.error_message = error_message


class NonRetryableError(DurableError):
    """Raise from a step or tool to fail at once, whatever its retry policy says."""


class RunFailedError(DurableError):
    """A run cannot start or resume as asked.

    Attributes:
        cause_code: A stable code, for example ``"runtime_config_error"``.
        reason: A stable reason, for example ``"run_input_mismatch"``.
    """

    def __init__(
        self,
        message: str,
        *,
        cause_code: str,
        reason: str,
        run_id: str | None = None,
        path: str | None = None,
    ):
        super().__init__(message, run_id=run_id, path=path)
        self.cause_code = cause_code
        self.reason = reason


class RunInputMismatchError(RunFailedError):
    """A run id was given again with another input than its run was started with.

    ``run_workflow`` and ``start_workflow`` with the ``run_id`` of an existing
    run (started, or enqueued and not started yet) and another input raise it,
    and nothing is written; the same input resumes or returns that run. Its
    ``cause_code`` is ``"runtime_config_error"`` and its ``reason``
    ``"run_input_mismatch"``, so code that catches ``RunFailedError`` catches it.

    Attributes:
        recorded_hash: The hash of the input the run was started with.
        input_hash: The hash of the input given now.
    """

    def __init__(self, message: str, *, run_id: str, recorded_hash: str, input_hash: str):
        super().__init__(
            message, cause_code="runtime_config_error", reason="run_input_mismatch", run_id=run_id
        )
        self.recorded_hash = recorded_hash
        self.input_hash = input_hash


class RunNotFoundError(DurableError):
    """No run with that id exists in this world."""


class RunFinishedError(DurableError):
    """The run has finished (completed, failed or cancelled), so nothing would read a message to it.

    Attributes:
        status: The run's status.
    """

    def __init__(self, message: str, *, run_id: str | None = None, status: str = "completed"):
        super().__init__(message, run_id=run_id)
        self.status = status


@dataclass(frozen=True)
class DriftChange:
    """One difference between the recorded manifest and the current one.

    Attributes:
        key: Where the difference is, for example ``tools.score.signature``.
        old: The recorded value (``None`` when the key is new).
        new: The current value (``None`` when the key is gone).
    """

    key: str
    old: Any
    new: Any


class CapabilityDriftError(DurableError):
    """The capabilities a run recorded differ from the ones the code has now.

    Attributes:
        changes: Each difference as data.
    """

    def __init__(self, message: str, *, run_id: str | None, changes: list[DriftChange]):
        super().__init__(message, run_id=run_id)
        self.changes = changes


class ArtifactIntegrityError(DurableError):
    """An artifact's payload is missing or no longer matches its recorded hash.

    Attributes:
        artifact: The artifact's name.
        expected: The hash the log recorded (``sha256:<hex>``).
        actual: The hash of the payload found, or ``None`` when it is missing.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        path: str | None = None,
        artifact: str | None = None,
        expected: str | None = None,
        actual: str | None = None,
    ):
        super().__init__(message, run_id=run_id, path=path)
        self.artifact = artifact
        self.expected = expected
        self.actual = actual


class DataDirectoryError(DurableError):
    """A folder or file of a data directory is a symbolic link, so using it would leave the directory.

    durable follows no link inside a data directory (the directory itself may
    be one): nothing was written, read or deleted through it. ``path`` names
    the link.
    """


class CheckpointNotFoundError(DurableError):
    """No checkpoint with that identity exists; list them with ``little checkpoints``."""


class LogCorruptedError(DurableError):
    """The log file is damaged or is not a durable log; nothing was written to it."""


class LogFormatError(DurableError):
    """The log was written by an SDK whose format this version cannot read."""


class LogUnavailableError(DurableError):
    """The log cannot be opened or written right now; what it holds is intact.

    Another process held it locked past ``busy_timeout``, or the disk is full.
    Nothing of the refused write was kept: fix the cause and resume the run.
    """


class CodecError(DurableError):
    """An encrypted payload cannot be decrypted: it was moved to another row, edited, or damaged.

    Nothing was returned in its place and nothing was written.
    """


class KeyMismatchError(CodecError):
    """The world's key is missing, or is not the key its data was encrypted under.

    Attributes:
        key_id: The id of the key the data needs (``None`` when the data is not encrypted).
    """

    def __init__(self, message: str, *, key_id: str | None, run_id: str | None = None):
        super().__init__(message, run_id=run_id)
        self.key_id = key_id


class MemoryStoreError(DurableError):
    """The memory store was used wrongly or is not installed."""


class OuterLoopError(DurableError):
    """An outer-loop manifest cannot be read or written."""


class RunTimeoutError(DurableError):
    """``run_workflow`` gave up after its timeout; the run stays resumable."""


class RunCancelledError(DurableError):
    """The run was cancelled: ``RunHandle.result()`` of a cancelled run raises it.

    Continue the run with ``durable.resume_run(run_id, world=...)`` or
    ``little resume RUN_ID``.

    Attributes:
        reason: ``"requested"`` (``cancel()``, ``little cancel``) or ``"deadline"``.
    """

    def __init__(self, message: str, *, run_id: str | None = None, reason: str = "requested"):
        super().__init__(message, run_id=run_id)
        self.reason = reason


class RunBlockedError(DurableError):
    """The run is ``blocked``: it cannot go on without a person's decision.

    ``RunHandle.result()`` of a blocked run raises it; ``status_detail()``
    says the same.

    Attributes:
        reason: ``"unknown_commit"``, ``"nondeterminism"``, ``"recovery_exhausted"`` or ``"budget"``.
        cause: The error that blocked the run, rebuilt (``None`` when there is none, as for
            ``recovery_exhausted``).
        fixes: The exact commands that unblock it, each one line.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None,
        reason: str,
        cause: BaseException | None = None,
        fixes: list[str] | None = None,
    ):
        super().__init__(message, run_id=run_id, path=getattr(cause, "path", None))
        self.reason = reason
        self.cause = cause
        self.fixes = list(fixes or [])


class StepTimeoutError(DurableError, TimeoutError):
    """One attempt of a ``@step(timeout=...)`` ran longer than its timeout.

    It is a step failure like any other: the step's retry policy may retry it
    (each attempt gets the full timeout), and a final one is recorded and
    replayed as this error.
    """


class DurableControl(BaseException):
    """Control flow that user code must not swallow with ``except Exception``."""

    run_id: str | None = None

    def __init__(self, message: str, *, run_id: str | None = None):
        super().__init__(message)
        self.run_id = run_id


class RunCancelled(DurableControl):
    """The run was cancelled; raised inside it at its next durable call or durable wait.

    The run's status becomes ``cancelled``; ``durable.resume_run`` continues it.

    Attributes:
        reason: ``"requested"`` (``cancel()``, ``little cancel``) or ``"deadline"``.
    """

    def __init__(self, message: str, *, run_id: str | None = None, reason: str = "requested"):
        super().__init__(message, run_id=run_id)
        self.reason = reason


class FencedError(DurableControl):
    """Another driver holds a newer fencing token; this driver must stop writing."""


class RunInterrupted(DurableControl):
    """The run is waiting for an answer to ``durable.interrupt(value)``.

    Resume it with ``run_workflow(..., run_id=run_id, resume=answer)``.

    Attributes:
        value: The value passed to ``interrupt``.
        path: The interrupt's path in the run.
    """

    def __init__(self, message: str, *, run_id: str, value: Any, path: str):
        super().__init__(message, run_id=run_id)
        self.value = value
        self.path = path
