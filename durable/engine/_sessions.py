"""Agent sessions: the model and tool calls of one agent loop, with their manifest.

``async with durable.session(role, tools=..., workflows=..., model_slot=...)``
(or ``@step(role=...)``) opens a scope for one agent loop, a planner,
orchestrator, worker or fixer. Its first entry records ``session.started``
with the session's manifest: the role, the model slot and the model id it
maps to, the tools it offers (their signatures) and the workflows it may
start (their definition hashes). A resume recomputes the manifest and fails
closed with ``CapabilityDriftError`` before the session runs anything.

Inside the session every ``@model_call`` and ``@tool`` is memoized as
anywhere else in a run, so a killed agent loop resumes by replaying its
committed model responses and tool results and re-issuing only the call
that was in flight.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, DriftChange
from ..events import DRIFT_ACCEPTED, SESSION_COMPLETED, SESSION_STARTED
from ..security import open_folder
from . import _event_writer as ev
from ._claim import Claim
from ._context import CURRENT, NOTHING, RunContext, Scope, check_awaited
from ._decide import Call
from ._keys import session_path
from ._session_manifest import (
    MANIFEST_FORMAT,
    check_role,
    manifest_changes,
    session_drift_error,
    session_manifest,
    without_tool_options,
)
from ._values import sha256_tag

CURRENT_SESSION: ContextVar[Session | None] = ContextVar("durable_session", default=None)
"""The innermost open session of the running task, or ``None``."""


class Session:
    """One open agent session: what ``async with durable.session(...)`` yields.

    Attributes:
        role: The session's role, e.g. ``"orchestrator"``.
        path: The session's path in the run (``None`` outside a run).
        model_slot: The model slot the session's model calls use.
        model: The model id that slot maps to in ``run_workflow(models=...)``.
        manifest: What the session was opened with, as recorded in ``session.started``.
        manifest_hash: The ``sha256:`` hash of ``manifest``.
        run_id: The run the session belongs to (``None`` outside a run).
    """

    __slots__ = (
        "_data_dir",
        "manifest",
        "manifest_hash",
        "model",
        "model_slot",
        "path",
        "role",
        "run_id",
    )

    def __init__(
        self,
        role: str,
        model_slot: str,
        model: str | None,
        manifest: dict[str, Any],
        *,
        path: str | None = None,
        run_id: str | None = None,
        data_dir: Path | None = None,
    ):
        self.role = role
        self.model_slot = model_slot
        self.model = model
        self.manifest = manifest
        self.manifest_hash = sha256_tag(manifest)
        self.path = path
        self.run_id = run_id
        self._data_dir = data_dir

    @property
    def scratch_dir(self) -> Path:
        """The session's folder ``<data_dir>/runs/<run_id>/harness/<path>/`` (created on use).

        Each folder on the way is made and opened without following a link.
        What your code writes in the folder afterwards goes through this path:
        a process that can write the data directory could still swap a link
        in between.

        Raises:
            ConfigurationError: Outside a run, or in a world without a data directory.
            DataDirectoryError: A folder on the way is a symbolic link.
        """
        if self.path is None or self.run_id is None:
            raise ConfigurationError("a session's scratch_dir exists only inside a durable run.")
        if self._data_dir is None:
            raise ConfigurationError(
                f"run {self.run_id!r}: session {self.path!r} has no scratch folder because its "
                "world keeps no files (memory_world); use local_world(data_dir) for scratch files."
            )
        rel = ("runs", folder_name(self.run_id), "harness", folder_name(self.path))
        fd = open_folder(self._data_dir, rel, create=True)  # a link on the way is refused, not followed
        assert fd is not None
        os.close(fd)
        return self._data_dir.joinpath(*rel)

    def __repr__(self) -> str:
        return f"<durable session {self.role!r} at {self.path!r} model={self.model!r}>"


def folder_name(part: str) -> str:
    """``part`` (a run id or a path) as one folder name, different parts giving different names.

    A child run started from a tool has a ``/`` in its generated id
    (``<run id>:<tool key>/<workflow>:<hash>``): ``/`` and a backslash are
    written ``%2F`` and ``%5C`` (and ``%`` itself ``%25``, NUL ``%00``), so the folder
    stays inside the run's folder. ``.`` and ``..`` become ``%2E`` and ``%2E%2E``, and the
    empty string ``%`` (no escaped part is a lone ``%``).
    """
    if part in ("", ".", ".."):
        return part.replace(".", "%2E") or "%"
    if "%" in part or "/" in part or "\\" in part or "\x00" in part:
        return part.replace("%", "%25").replace("/", "%2F").replace("\\", "%5C").replace("\x00", "%00")
    return part


# -- opening a session ----------------------------------------------------------


def _open(run: RunContext, path: str, role: str, slot: str, tools: Any, workflows: Any) -> Session:
    """Record or check the session's manifest; return the open ``Session``."""
    manifest = session_manifest(role, slot, run.models, tools, workflows)
    recorded = run.recorded.sessions.get(path) if run.replaying else None
    if recorded is not None and recorded.get("manifest_format", 1) < MANIFEST_FORMAT:
        manifest = without_tool_options(manifest)  # recorded before tools listed their options
    session = Session(
        role,
        slot,
        run.models.get(slot),
        manifest,
        path=path,
        run_id=run.run_id,
        data_dir=run.world.data_dir,
    )
    if recorded is not None:
        old = recorded.get("manifest") or {}
        if recorded.get("manifest_hash") != session.manifest_hash:
            changes = manifest_changes(old, manifest) or [
                DriftChange("manifestHash", recorded.get("manifest_hash"), session.manifest_hash)
            ]
            if not run.accepts(changes):
                raise session_drift_error(run.run_id, role, path, old, manifest, changes)
            if recorded.get("manifest_format", 1) < MANIFEST_FORMAT:  # accepted: record it whole
                manifest = session_manifest(role, slot, run.models, tools, workflows)
                session.manifest, session.manifest_hash = manifest, sha256_tag(manifest)
            run.record(
                DRIFT_ACCEPTED,
                ev.drift_accepted(
                    [{"key": c.key, "old": c.old, "new": c.new} for c in changes],
                    manifest,
                    session.manifest_hash,
                    session=path,
                ),
            )
        return session
    run.record(
        SESSION_STARTED, ev.session_started(path, role, manifest, session.manifest_hash, MANIFEST_FORMAT)
    )
    return session


def _close(run: RunContext, session: Session) -> None:
    recorded = run.recorded.sessions.get(session.path or "")
    if recorded is not None and recorded.get("completed"):
        return  # a replayed session ends once in the log
    run.emit(SESSION_COMPLETED, ev.session_completed(session.path or "", session.role, session.manifest_hash))


def session_slot(role: str, model_slot: str | None) -> str:
    """The model slot of a session ``role`` (its role by default); a bad role or slot is refused."""
    check_role(role)
    slot = role if model_slot is None else model_slot
    if not isinstance(slot, str) or not slot:
        raise ConfigurationError(f"session model_slot= takes a non-empty string, not {slot!r}.")
    return slot


def opened_at(claim: Claim, role: str, slot: str, tools: Any, workflows: Any) -> tuple[Session, bool]:
    """The session opened at ``claim``'s position (its manifest recorded or checked); whether it resumed."""
    scope, run = claim.scope, claim.run
    path = session_path(scope.prefix, role, claim.n)
    claim.recorded(run.recorded.sessions, Call("session", role, "", path))
    resumed = run.replaying and path in run.recorded.sessions
    return _open(run, path, role, slot, tools, workflows), resumed


@asynccontextmanager
async def session(
    role: str,
    *,
    tools: Iterable[Any] = (),
    workflows: Iterable[Any] = (),
    model_slot: str | None = None,
) -> AsyncIterator[Session]:
    """Open an agent session: one agent loop's model and tool calls, with its manifest.

    The session takes the next position of the enclosing scope and gives
    its calls the path ``session:<role>#<n>``. Its manifest is recorded the
    first time; a resume recomputes it and raises ``CapabilityDriftError``
    when anything differs, before the session runs anything. Outside a run
    the session records nothing and its calls are plain calls.

    Args:
        role: What the session does, e.g. ``"planner"``, ``"orchestrator"``,
            ``"worker"`` or ``"fixer"`` (any name usable in a path).
        tools: The ``@tool`` functions the session offers its model.
        workflows: The ``@workflow`` functions it may start as child runs.
        model_slot: The model slot its model calls use (default: the role).

    Yields:
        The open ``Session``; ``session.model`` is the model id the slot maps to.

    Raises:
        CapabilityDriftError: A resume found another model id, tool signature or workflow.
        ConfigurationError: A bad role, or tools/workflows that are not decorated.

    Example:
        >>> import asyncio, durable
        >>> @durable.tool
        ... async def add(a: int, b: int) -> int:
        ...     return a + b
        >>> @durable.workflow
        ... async def agent() -> int:
        ...     async with durable.session("worker", tools=[add]) as s:
        ...         return await add(2, 3)
        >>> asyncio.run(durable.run_workflow(agent, world=durable.memory_world()))
        5
    """
    slot = session_slot(role, model_slot)
    scope = CURRENT.get()
    if scope is None:
        outside = Session(role, slot, None, session_manifest(role, slot, {}, tools, workflows))
        token0 = CURRENT_SESSION.set(outside)
        try:
            yield outside
        finally:
            CURRENT_SESSION.reset(token0)
        return
    run = scope.run
    with Claim(scope, f"session {role!r}") as claim:
        opened, resumed = opened_at(claim, role, slot, tools, workflows)
        path = opened.path or ""
        await run.flush_async()  # the manifest is durable before the session does anything
        traced = None if run.tracer is None else run.tracer.start_session(role, run.run_id, path, resumed)
        inner = Scope(run, path)
        token = CURRENT.set(inner)
        stoken = CURRENT_SESSION.set(opened)
        stopped: BaseException | None = None
        try:
            yield opened
            if inner.last is not NOTHING:
                check_awaited(inner, f"session {role!r}")
            _close(run, opened)
            run.flush_soon()
        except BaseException as exc:
            stopped = exc
            raise
        finally:
            CURRENT_SESSION.reset(stoken)
            CURRENT.reset(token)
            if traced is not None:
                traced.end(stopped)


@asynccontextmanager
async def _in_place(role: str, slot: str, tools: Any, workflows: Any) -> AsyncIterator[None]:
    """Make the current scope (a ``@step(role=...)`` body) a session."""
    scope = CURRENT.get()
    if scope is None:
        yield
        return
    run = scope.run
    opened = _open(run, scope.path, role, slot, tools, workflows)
    await run.flush_async()
    stoken = CURRENT_SESSION.set(opened)
    try:
        yield
        _close(run, opened)
    finally:
        CURRENT_SESSION.reset(stoken)


def session_step_body(
    fn: Callable[..., Any],
    role: str,
    *,
    tools: Any = (),
    workflows: Any = (),
    model_slot: str | None = None,
) -> Callable[..., Awaitable[Any]]:
    """Wrap a ``@step(role=...)`` body so that it runs as a session at the step's path."""
    check_role(role)
    if not inspect.iscoroutinefunction(fn):
        raise ConfigurationError(
            f"@step(role={role!r}) on {fn.__qualname__}: a session step must be an async def."
        )
    slot = role if model_slot is None else model_slot
    if not isinstance(slot, str) or not slot:
        raise ConfigurationError(f"@step model_slot= takes a non-empty string, not {slot!r}.")
    tools, workflows = tuple(tools), tuple(workflows)
    session_manifest(role, slot, {}, tools, workflows)  # misuse fails at decoration time

    @functools.wraps(fn)
    async def body(*args: Any, **kwargs: Any) -> Any:
        async with _in_place(role, slot, tools, workflows):
            return await fn(*args, **kwargs)

    return body


def current_session() -> Session | None:
    """The innermost open session of the running task, or ``None``."""
    return CURRENT_SESSION.get()


def scratch_dir() -> Path:
    """The current session's scratch folder: ``<data_dir>/runs/<run_id>/harness/<path>/``.

    The folder survives kills, so an agent can keep the files it writes
    while it works there. It is created on first use.

    Raises:
        ConfigurationError: Outside a session in a run, or in a world without files.
    """
    opened = CURRENT_SESSION.get()
    if opened is None or opened.path is None:
        raise ConfigurationError(
            "durable.scratch_dir() is only available inside a durable.session(...) or a "
            "@step(role=...) running in a durable run."
        )
    return opened.scratch_dir
