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
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ._context import CURRENT, RunContext, Scope
from ._manifest import definition_hash, signature_text
from ._serde import canonical, sha256_tag
from ._spec import Spec, spec_of
from .errors import CapabilityDriftError, ConfigurationError, DriftChange, NondeterminismError

_BAD_ROLE_CHARS = set(".[]#:/\\")

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

        Raises:
            ConfigurationError: Outside a run, or in a world without a data directory.
        """
        if self.path is None or self.run_id is None:
            raise ConfigurationError("a session's scratch_dir exists only inside a durable run.")
        if self._data_dir is None:
            raise ConfigurationError(
                f"run {self.run_id!r}: session {self.path!r} has no scratch folder because its "
                "world keeps no files (memory_world); use local_world(data_dir) for scratch files."
            )
        folder = self._data_dir / "runs" / folder_name(self.run_id) / "harness" / folder_name(self.path)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def __repr__(self) -> str:
        return f"<durable session {self.role!r} at {self.path!r} model={self.model!r}>"


def folder_name(part: str) -> str:
    """``part`` (a run id or a path) as one folder name, different parts giving different names.

    A child run started from a tool has a ``/`` in its generated id
    (``<run id>:<tool key>/<workflow>:<hash>``): ``/`` and a backslash are
    written ``%2F`` and ``%5C`` (and ``%`` itself ``%25``), so the folder stays inside
    the run's folder. ``.`` and ``..`` become ``%2E`` and ``%2E%2E``.
    """
    if part in (".", ".."):
        return part.replace(".", "%2E")
    if "%" in part or "/" in part or "\\" in part:
        return part.replace("%", "%25").replace("/", "%2F").replace("\\", "%5C")
    return part


# -- the manifest (pure) --------------------------------------------------------


def _specs(kind: str, what: str, items: Iterable[Any]) -> list[Spec]:
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise ConfigurationError(f"session {what}= takes a list of @{kind} functions, not {items!r}.")
    found: list[Spec] = []
    for item in items:
        spec = spec_of(item)
        if spec is None or spec.kind != kind:
            raise ConfigurationError(
                f"session {what}= takes functions decorated with @{kind}; {item!r} is not one."
            )
        found.append(spec)
    names = [s.name for s in found]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigurationError(f"session {what}= names {kind} {dup!r} more than once.")
    return sorted(found, key=lambda s: s.name)


def _signature(spec: Spec) -> str:
    """A tool's signature with annotations evaluated where possible: ``(q: str) -> str``."""
    try:
        sig = inspect.signature(spec.fn, eval_str=True)
    except Exception:  # an annotation that does not evaluate: keep the text as written
        return signature_text(spec)
    params = list(sig.parameters.values())
    if spec.binding in ("method", "classmethod") and params:
        params = params[1:]
    return str(sig.replace(parameters=params))


def check_role(role: Any) -> str:
    """``role`` itself, or a ``ConfigurationError`` when it cannot name a session."""
    if not isinstance(role, str) or not role or _BAD_ROLE_CHARS & set(role):
        raise ConfigurationError(
            f"session role {role!r} is not usable in a path: use a non-empty string without "
            "any of . [ ] # : / \\"
        )
    return role


def session_manifest(
    role: str,
    model_slot: str,
    models: Mapping[str, str],
    tools: Iterable[Any],
    workflows: Iterable[Any],
) -> dict[str, Any]:
    """The manifest a session records: role, model slot and id, tools, workflows.

    Args:
        role: The session's role.
        model_slot: The model slot its model calls use.
        models: The run's slot → model id mapping.
        tools: The ``@tool`` functions the session offers.
        workflows: The ``@workflow`` functions the session may start.

    Returns:
        A JSON-safe dict whose keys read as the drift report shows them, e.g.
        ``orchestratorModelSlotId`` and ``availableWorkflows[1].definitionHash``.
    """
    return {
        "role": check_role(role),
        "modelSlot": model_slot,
        f"{role}ModelSlotId": models.get(model_slot),
        "availableTools": [
            {"name": s.name, "signature": _signature(s)} for s in _specs("tool", "tools", tools)
        ],
        "availableWorkflows": [
            {"name": s.name, "definitionHash": definition_hash(s)}
            for s in _specs("workflow", "workflows", workflows)
        ],
    }


def _flat(value: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _flat(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value  # a scalar, or an empty container (so [] differs from a missing key)
    return out


_MISSING: Any = object()


def manifest_changes(old: dict[str, Any], new: dict[str, Any]) -> list[DriftChange]:
    """Each leaf that differs between two session manifests, in the order of the new one.

    A leaf present on one side only is a change even when its value is ``None``.
    """
    a, b = _flat(old, "", {}), _flat(new, "", {})
    keys = list(b) + [k for k in a if k not in b]
    return [
        DriftChange(k, a.get(k), b.get(k))
        for k in keys
        if a.get(k, _MISSING) is _MISSING or b.get(k, _MISSING) is _MISSING or a[k] != b[k]
    ]


def _show(value: Any) -> str:
    return "(none)" if value is None else canonical(value)


def _note(change: DriftChange, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    m = re.fullmatch(r"available(Workflows|Tools)\[(\d+)\]\.(definitionHash|signature)", change.key)
    if m is None:
        return None
    group = f"available{m.group(1)}"
    i = int(m.group(2))
    entries = new.get(group) or old.get(group) or []
    name = entries[i]["name"] if i < len(entries) else "?"
    if m.group(1) == "Workflows":
        return f"({name} workflow definition changed)"
    return f"({name} tool signature changed)"


def session_drift_error(
    run_id: str,
    role: str,
    path: str,
    old: dict[str, Any],
    new: dict[str, Any],
    changes: list[DriftChange],
) -> CapabilityDriftError:
    """The ``CapabilityDriftError`` of a session whose manifest changed."""
    lines = []
    for c in changes:
        lines.append(f"- {c.key}: {_show(c.old)} → {_show(c.new)}")
        note = _note(c, old, new)
        if note is not None:
            lines.append(f"  {note}")
    body = "\n".join(lines)
    return CapabilityDriftError(
        f"Run {run_id!r} was started with a different {role} config (session {path!r}).\n\n"
        f"Changes detected:\n{body}\n\n"
        "To resume cleanly, restore the prior state.\n"
        "To start fresh, run with a new run_id.",
        run_id=run_id,
        changes=changes,
    )


def recorded_model_drift(
    run_id: str, sessions: Mapping[str, dict[str, Any]], models: Mapping[str, str]
) -> CapabilityDriftError | None:
    """The drift of the model ids behind the recorded sessions' slots, found at resume.

    A run resumed with another ``models=`` mapping fails before anything runs,
    with the session's own key (``orchestratorModelSlotId``), not a generic one.
    """
    for path, started in sessions.items():
        old = started.get("manifest") or {}
        role = old.get("role")
        slot = old.get("modelSlot")
        if not isinstance(role, str) or not isinstance(slot, str):
            continue
        key = f"{role}ModelSlotId"
        if old.get(key) != models.get(slot):
            new = {**old, key: models.get(slot)}
            return session_drift_error(
                run_id, role, path, old, new, [DriftChange(key, old.get(key), models.get(slot))]
            )
    return None


# -- opening a session ----------------------------------------------------------


def _open(run: RunContext, path: str, role: str, slot: str, tools: Any, workflows: Any) -> Session:
    """Record or check the session's manifest; return the open ``Session``."""
    manifest = session_manifest(role, slot, run.models, tools, workflows)
    session = Session(
        role,
        slot,
        run.models.get(slot),
        manifest,
        path=path,
        run_id=run.run_id,
        data_dir=run.world.data_dir,
    )
    recorded = run.recorded.sessions.get(path) if run.replaying else None
    if recorded is not None:
        old = recorded.get("manifest") or {}
        if recorded.get("manifest_hash") != session.manifest_hash:
            changes = manifest_changes(old, manifest) or [
                DriftChange("manifestHash", recorded.get("manifest_hash"), session.manifest_hash)
            ]
            raise session_drift_error(run.run_id, role, path, old, manifest, changes)
        return session
    run.emit(
        "session.started",
        {"path": path, "role": role, "manifest": manifest, "manifest_hash": session.manifest_hash},
    )
    run.recorded.sessions[path] = {"path": path, "role": role, "manifest": manifest}
    return session


def _close(run: RunContext, session: Session) -> None:
    recorded = run.recorded.sessions.get(session.path or "")
    if recorded is not None and recorded.get("completed"):
        return  # a replayed session ends once in the log
    run.emit(
        "session.completed",
        {"path": session.path, "role": session.role, "manifest_hash": session.manifest_hash},
    )


def _check_new_position(run: RunContext, scope: Scope, n: int, role: str, path: str) -> None:
    if not run.replaying or path in run.recorded.sessions:
        return
    rec = run.recorded.position(scope.path, n)
    if rec is not None:
        kind, name, ih, where = rec
        raise NondeterminismError(
            f"run {run.run_id!r}: the code opened session {role!r} at position {n} of scope "
            f"{scope.path or '<workflow>'!r}, but the log recorded {kind} {name!r} at {where!r} "
            "there.\nRestore the code the run was started with and resume, or start a new run id.",
            run_id=run.run_id,
            path=path,
            recorded={"kind": kind, "name": name, "input_hash": ih, "path": where},
            attempted={"kind": "session", "name": role, "input_hash": "", "path": path},
        )


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
    check_role(role)
    slot = role if model_slot is None else model_slot
    if not isinstance(slot, str) or not slot:
        raise ConfigurationError(f"session model_slot= takes a non-empty string, not {slot!r}.")
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
    n = scope.enter(f"session {role!r}")
    try:
        path = f"{scope.prefix}session:{role}#{n}"
        _check_new_position(run, scope, n, role, path)
        opened = _open(run, path, role, slot, tools, workflows)
        await run.flush_async()  # the manifest is durable before the session does anything
    except BaseException:
        scope.busy = None
        raise
    token = CURRENT.set(Scope(run, path))
    stoken = CURRENT_SESSION.set(opened)
    try:
        yield opened
        _close(run, opened)
        run.flush_soon()
    finally:
        CURRENT_SESSION.reset(stoken)
        CURRENT.reset(token)
        scope.busy = None


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
