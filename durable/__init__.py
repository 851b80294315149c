"""durable: make plain async functions durable.

Decorate functions with ``@workflow``, ``@step``, ``@tool`` and
``@model_call``; run them with ``run_workflow(..., world=local_world())``.
When the process dies, call again with the same ``run_id``: every committed
call returns its recorded result and only unfinished work runs.
"""

from __future__ import annotations

import contextlib

from .engine._artifact_save import save_artifact
from .engine._artifacts import ArtifactRef
from .engine._budget import Budget, Usage
from .engine._current import idempotency_key, model_for
from .engine._decorators import DurableFunction, model_call, step, tool, workflow
from .engine._determinism import interrupt, now, random, sleep, uuid4
from .engine._loader import recover
from .engine._messages import close_stream, recv, set_event, write_stream
from .engine._outbox_call import OutboxRef
from .engine._parallel import branch, parallel
from .engine._patched import patched
from .engine._recorded import Recorded
from .engine._retry_policy import RetryPolicy
from .engine._sessions import Session, scratch_dir, session
from .engine._spec import NEVER_HAPPENED
from .errors import (
    ArtifactIntegrityError,
    BudgetExhaustedError,
    CapabilityDriftError,
    CheckpointNotFoundError,
    CodecError,
    CompensationFailedError,
    ConfigurationError,
    DataDirectoryError,
    DurableError,
    FencedError,
    KeyMismatchError,
    LogCorruptedError,
    LogFormatError,
    LogUnavailableError,
    MaxVisitsExceededError,
    MemoryStoreError,
    NondeterminismError,
    NonRetryableError,
    OuterLoopError,
    RunBlockedError,
    RunCancelled,
    RunCancelledError,
    RunFailedError,
    RunFinishedError,
    RunInputMismatchError,
    RunInterrupted,
    RunNotFoundError,
    RunTimeoutError,
    SerializationError,
    StepFailedError,
    StepTimeoutError,
    UnknownCommitError,
)
from .memory import Embedder, MemoryItem, MemoryStore, NewItem, SearchHit, lexical_embedder
from .ops._compaction import Compaction, compact, gc
from .ops._dry_resume import DryResume, dry_resume
from .ops._timetravel import Checkpoint, Fork, Restored, checkpoints, fork, restore
from .outer import Continue, Cycle, CycleRecord, Done, OuterLoopResult, run_outer_loop
from .runtime import (
    Finding,
    Queue,
    RunHandle,
    RunStatus,
    Schedule,
    Worker,
    doctor,
    handle,
    recover_runs,
    resume_run,
    run_workflow,
    send,
    start_workflow,
)
from .security._codecs import Codec, EncryptionCodec
from .store import MemoryLog, RunInfo, SqliteLog
from .worlds._local import World, local_world, memory_world
from .worlds._postgres import PostgresWorld, postgres_world

__version__ = "0.1.0"

__all__ = [
    "NEVER_HAPPENED",
    "ArtifactIntegrityError",
    "ArtifactRef",
    "Budget",
    "BudgetExhaustedError",
    "CapabilityDriftError",
    "Checkpoint",
    "CheckpointNotFoundError",
    "Codec",
    "CodecError",
    "Compaction",
    "CompensationFailedError",
    "ConfigurationError",
    "Continue",
    "Cycle",
    "CycleRecord",
    "DataDirectoryError",
    "Done",
    "DryResume",
    "DurableError",
    "DurableFunction",
    "Embedder",
    "EncryptionCodec",
    "FencedError",
    "Finding",
    "Fork",
    "KeyMismatchError",
    "LogCorruptedError",
    "LogFormatError",
    "LogUnavailableError",
    "MaxVisitsExceededError",
    "MemoryItem",
    "MemoryLog",
    "MemoryStore",
    "MemoryStoreError",
    "NewItem",
    "NonRetryableError",
    "NondeterminismError",
    "OutboxRef",
    "OuterLoopError",
    "OuterLoopResult",
    "PostgresWorld",
    "Queue",
    "Recorded",
    "Restored",
    "RetryPolicy",
    "RunBlockedError",
    "RunCancelled",
    "RunCancelledError",
    "RunFailedError",
    "RunFinishedError",
    "RunHandle",
    "RunInfo",
    "RunInputMismatchError",
    "RunInterrupted",
    "RunNotFoundError",
    "RunStatus",
    "RunTimeoutError",
    "Schedule",
    "SearchHit",
    "SerializationError",
    "Session",
    "SqliteLog",
    "StepFailedError",
    "StepTimeoutError",
    "UnknownCommitError",
    "Usage",
    "Worker",
    "World",
    "branch",
    "checkpoints",
    "close_stream",
    "compact",
    "doctor",
    "dry_resume",
    "fork",
    "gc",
    "handle",
    "idempotency_key",
    "interrupt",
    "lexical_embedder",
    "local_world",
    "memory_world",
    "model_call",
    "model_for",
    "now",
    "parallel",
    "patched",
    "postgres_world",
    "random",
    "recover",
    "recover_runs",
    "recv",
    "restore",
    "resume_run",
    "run_outer_loop",
    "run_workflow",
    "save_artifact",
    "scratch_dir",
    "send",
    "session",
    "set_event",
    "sleep",
    "start_workflow",
    "step",
    "tool",
    "uuid4",
    "workflow",
    "write_stream",
]

for _name in __all__:
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and getattr(_obj, "__module__", "").startswith("durable."):
        with contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "durable"
