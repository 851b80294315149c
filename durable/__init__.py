"""durable: make plain async functions durable.

Decorate functions with ``@workflow``, ``@step``, ``@tool`` and
``@model_call``; run them with ``run_workflow(..., world=local_world())``.
When the process dies, call again with the same ``run_id``: every committed
call returns its recorded result and only unfinished work runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from ._artifact_save import save_artifact
from ._artifacts import ArtifactRef
from ._context import current_scope
from ._decorators import DurableFunction, make_decorator
from ._determinism import interrupt, now, random, sleep, uuid4
from ._embedders import Embedder, lexical_embedder
from ._engine import NEVER_HAPPENED, current_effect_key
from ._log import MemoryLog, RunInfo
from ._memory import MemoryStore
from ._memory_items import MemoryItem, NewItem, SearchHit
from ._outer import run_outer_loop
from ._outer_types import Continue, Cycle, CycleRecord, Done, OuterLoopResult
from ._parallel import branch, parallel
from ._recovery import Compaction, compact, gc, recover
from ._retry import RetryPolicy
from ._runner import run_workflow
from ._sessions import Session, scratch_dir, session
from ._sqlite import SqliteLog
from ._timetravel import Checkpoint, Fork, Restored, checkpoints, fork, restore
from ._worlds import World, local_world, memory_world
from .errors import (
    ArtifactIntegrityError,
    CapabilityDriftError,
    CheckpointNotFoundError,
    ConfigurationError,
    DurableError,
    FencedError,
    LogCorruptedError,
    LogFormatError,
    LogUnavailableError,
    MaxVisitsExceededError,
    MemoryStoreError,
    NondeterminismError,
    NonRetryableError,
    OuterLoopError,
    RunFailedError,
    RunInterrupted,
    RunNotFoundError,
    RunTimeoutError,
    SerializationError,
    StepFailedError,
    UnknownCommitError,
)

__version__ = "0.1.0"

P = ParamSpec("P")
R = TypeVar("R")


def idempotency_key() -> str:
    """The stable idempotency key of the running ``@tool`` or ``@model_call``.

    Hand it to external systems so they can deduplicate a re-driven call.
    It is ``"<run_id>:<effect key>"`` and does not change across resumes.

    Raises:
        ConfigurationError: Called outside an effect body in a run.
    """
    return current_effect_key()


def model_for(slot: str, default: str | None = None) -> str:
    """The model the running run maps ``slot`` to (``run_workflow(models=...)``).

    A ``@model_call`` body asks this which model to call, so a fork with
    another model mapping calls other models after its checkpoint.

    Args:
        slot: The slot name, e.g. ``"worker"``.
        default: What to return when the run maps no model to ``slot``.

    Raises:
        ConfigurationError: Called outside a run, or the slot is unmapped and there is no default.
    """
    models = current_scope("durable.model_for()").run.models
    if slot in models:
        return models[slot]
    if default is None:
        raise ConfigurationError(
            f"this run maps no model to slot {slot!r} (mapped: {sorted(models)}); pass "
            f"models={{{slot!r}: ...}} to run_workflow, or give model_for a default."
        )
    return default


@overload
def workflow(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def workflow(
    *, name: str | None = None, version: str | int | None = None, uses: list[Any] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def workflow(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    uses: list[Any] | None = None,
) -> Any:
    """Mark a function as a workflow: the body of a durable run.

    Run it with ``run_workflow``. Called inside another run it starts a child
    run with its own log. Called outside any run it is the plain function.

    Args:
        fn: The function (when used bare, ``@workflow``).
        name: The workflow's name in the log (default: the function's name).
        version: A manual drift marker: change it to make resumes fail closed.
        uses: Capabilities (tools, model calls, steps, workflows) the manifest covers.
    """
    return make_decorator("workflow", fn, {"name": name, "version": version, "uses": uses})


@overload
def step(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def step(
    *,
    name: str | None = None,
    version: str | int | None = None,
    max_visits: int = 1,
    retry: Any = None,
    role: str | None = None,
    tools: list[Any] | None = None,
    workflows: list[Any] | None = None,
    model_slot: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def step(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    max_visits: int = 1,
    retry: Any = None,
    role: str | None = None,
    tools: list[Any] | None = None,
    workflows: list[Any] | None = None,
    model_slot: str | None = None,
) -> Any:
    """Mark a function as a step: the unit of memoization.

    Inside a run a committed step's output is never recomputed. A step may be
    entered ``max_visits`` times per scope (decision loops); each visit gets
    the path suffix ``.visit[k]`` when ``max_visits > 1``.

    Args:
        fn: The function (when used bare, ``@step``).
        name: The step's name in paths (default: the function's name).
        version: A manual drift marker.
        max_visits: How many times the step may be entered in one scope.
        retry: A ``RetryPolicy`` or tenacity ``stop``/``wait``/``retry`` objects.
        role: Makes the step an agent session with this role (see ``durable.session``).
        tools: With ``role``: the ``@tool`` functions the session offers.
        workflows: With ``role``: the ``@workflow`` functions the session may start.
        model_slot: With ``role``: the session's model slot (default: the role).
    """
    return make_decorator(
        "step",
        fn,
        {
            "name": name,
            "version": version,
            "max_visits": max_visits,
            "retry": retry,
            "role": role,
            "tools": tools,
            "workflows": workflows,
            "model_slot": model_slot,
        },
    )


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    version: str | int | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None,
    retry: Any = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def tool(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None,
    retry: Any = None,
) -> Any:
    """Mark a function as a tool: an external side effect, bracketed by intent and receipt.

    After a crash between intent and receipt, an ``idempotent=True`` tool is
    called again with the same ``durable.idempotency_key()``; a tool with
    ``reconcile=fn`` gets ``fn(key, input)`` asked first (return the result,
    or ``durable.NEVER_HAPPENED``); any other tool fails closed with
    ``UnknownCommitError``.

    Args:
        fn: The function (when used bare, ``@tool``).
        name: The tool's name in effect keys.
        version: A manual drift marker.
        idempotent: Safe to call again with the same idempotency key.
        reconcile: Asked after an unknown commit whether the effect happened.
        retry: A ``RetryPolicy`` or tenacity ``stop``/``wait``/``retry`` objects.
    """
    return make_decorator(
        "tool",
        fn,
        {
            "name": name,
            "version": version,
            "idempotent": idempotent,
            "reconcile": reconcile,
            "retry": retry,
        },
    )


@overload
def model_call(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def model_call(
    *,
    name: str | None = None,
    version: str | int | None = None,
    slot: str | None = None,
    retry: Any = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def model_call(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    slot: str | None = None,
    retry: Any = None,
) -> Any:
    """Mark a function as a model call: an external read whose response is recorded.

    A replay returns the recorded response; a call cut by a crash is issued
    again. ``slot`` names the model slot that ``run_workflow(models=...)`` maps.

    Args:
        fn: The function (when used bare, ``@model_call``).
        name: The call's name in effect keys.
        version: A manual drift marker.
        slot: The model slot, e.g. ``"worker"``.
        retry: A ``RetryPolicy`` or tenacity ``stop``/``wait``/``retry`` objects.
    """
    return make_decorator("model", fn, {"name": name, "version": version, "slot": slot, "retry": retry})


__all__ = [
    "NEVER_HAPPENED",
    "ArtifactIntegrityError",
    "ArtifactRef",
    "CapabilityDriftError",
    "Checkpoint",
    "CheckpointNotFoundError",
    "Compaction",
    "ConfigurationError",
    "Continue",
    "Cycle",
    "CycleRecord",
    "Done",
    "DurableError",
    "DurableFunction",
    "Embedder",
    "FencedError",
    "Fork",
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
    "OuterLoopError",
    "OuterLoopResult",
    "Restored",
    "RetryPolicy",
    "RunFailedError",
    "RunInfo",
    "RunInterrupted",
    "RunNotFoundError",
    "RunTimeoutError",
    "SearchHit",
    "SerializationError",
    "Session",
    "SqliteLog",
    "StepFailedError",
    "UnknownCommitError",
    "World",
    "branch",
    "checkpoints",
    "compact",
    "fork",
    "gc",
    "idempotency_key",
    "interrupt",
    "lexical_embedder",
    "local_world",
    "memory_world",
    "model_call",
    "model_for",
    "now",
    "parallel",
    "random",
    "recover",
    "restore",
    "run_outer_loop",
    "run_workflow",
    "save_artifact",
    "scratch_dir",
    "session",
    "sleep",
    "step",
    "tool",
    "uuid4",
    "workflow",
]

for _name in __all__:
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and getattr(_obj, "__module__", "").startswith("durable."):
        with contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "durable"
