"""``dry_resume()``: what a resume of a run would do under the current code, without doing it.

The run's log is replayed against the code as a resume would: the drift
check first, then the workflow body from the top, each durable call asking
the log. The first call that would execute (write its start, its intent,
its value) stops the replay there instead: no body the log did not record
runs and nothing is written. No lock is taken and no fencing token drawn,
so a dry resume of a run that a worker drives now is safe.
"""

from __future__ import annotations

import copy
import inspect
import json
from dataclasses import dataclass, field
from typing import Any

from ..engine import (
    CURRENT,
    Recorded,
    RunContext,
    Scope,
    Spec,
    WorldCore,
    acceptance_blockers,
    blocked_advice,
    call_sync_body,
    change_lines,
    drift_error,
    manifest_hash,
    memory_manifest,
    recorded_model_drift,
    recover_log,
    run_drift,
    run_manifest,
    run_not_found,
    signature_changes,
    validate_input,
    workflow_spec,
)
from ..errors import (
    CapabilityDriftError,
    ConfigurationError,
    DriftChange,
    NondeterminismError,
    RunInterrupted,
    UnknownCommitError,
)
from ..events import RUN_CANCELLED, RUN_COMPLETED, RUN_FAILED, RUN_INTERRUPTED
from ..store import Message


class _Frontier(BaseException):
    """Raised where the dry replay reaches a call that would execute (not an error)."""

    def __init__(self, where: str | None, waits: str | None = None):
        super().__init__(where)
        self.where = where
        self.waits = waits


class _DryRun(RunContext):
    """A run context that replays only: the first write stops the replay at its key."""

    __slots__ = ()

    def emit(self, type_: str, data: dict[str, Any]) -> int:
        raise _Frontier(str(data.get("path") or data.get("key") or type_))

    def emit_encoded(self, type_: str, data: str) -> int:
        raise _Frontier(type_)

    async def pause(self, seconds: float, *, poll: bool = False) -> None:
        if seconds > 0:  # a sleep or a recv that would wait: the run goes on past its log
            raise _Frontier(None, "a durable sleep")


class _Mailbox:
    """A run's mailbox as a dry replay sees it: a message that waits there stops the replay, unconsumed."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def consume(self, run_id: str, topic: str | None, token: int, build: Any) -> Any:
        """Stop at the ``recv`` that would consume the message (its key, from the event it would write)."""
        stand_in = Message(0, run_id, topic, "", "null", 0.0, None)
        where = json.loads(build(stand_in)[2]).get("key")
        raise _Frontier(str(where) if where else None)


def _unconsuming(world: WorldCore) -> WorldCore:
    """``world`` with a mailbox that a dry replay cannot consume from (a log without one stays as it is)."""
    try:
        store = world.open_messages()
    except ConfigurationError:
        return world
    view = copy.copy(world)
    view.message_store = _Mailbox(store)
    return view


@dataclass(frozen=True)
class DryResume:
    """What a resume of one run would do under the current code.

    Attributes:
        run_id: The run.
        ok: Whether a resume would go on (``False``: it would raise ``error``).
        continues_at: The path or key of the first call a resume would execute
            (``None``: every call replays, and the run would complete; or it finished).
        waits_for: What the run would wait for at ``continues_at`` first (``an answer``,
            ``a durable sleep``), else ``None``.
        status: The run's status in its log.
        error: The error a real resume would raise (drift, nondeterminism), else ``None``.
        changes: The drift that a real resume would refuse (empty unless it is drift).
        blockers: The changes whose acceptance (``accept_drift``) would not let the run
            go on either, each with why (its recorded calls do not bind to the new code).
    """

    run_id: str
    ok: bool
    continues_at: str | None = None
    waits_for: str | None = None
    status: str = "running"
    error: BaseException | None = None
    changes: list[DriftChange] = field(default_factory=list)
    blockers: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """One line for ``little dry-resume``: ``ok`` and where it continues, or the error's first line."""
        if not self.ok:
            first = str(self.error).splitlines()[0] if self.error is not None else "fails"
            return f"{self.run_id}: would fail: {type(self.error).__name__}: {first}"
        if self.continues_at is None:
            return f"{self.run_id}: ok, every recorded call replays ({self.status})"
        waits = f", where it waits for {self.waits_for}" if self.waits_for else ""
        return f"{self.run_id}: ok, continues at {self.continues_at!r}{waits}"

    def detail(self) -> str:
        """The drift as ``- key: old → new`` lines and why accepting would not help; or the error's rest."""
        if self.changes:
            lines = change_lines(self.changes)
            return f"{lines}\n{blocked_advice(self.blockers)}" if self.blockers else lines
        return "" if self.error is None else "\n".join(str(self.error).splitlines()[1:])


async def dry_resume(wf: Any, run_id: str, *, world: WorldCore) -> DryResume:
    """Replay a run's log against the current code, running no unrecorded body and writing nothing.

    This is the check to run before a deploy (``little dry-resume`` runs it
    for every unfinished run): ``ok`` with ``continues_at``, the first call
    a resume would execute, or the error a real resume would raise.

    Args:
        wf: The ``@workflow`` function as the code to deploy defines it.
        run_id: The run.
        world: The run's world.

    Returns:
        The ``DryResume``.

    Raises:
        RunNotFoundError: The world has no such run.
        ConfigurationError: ``wf`` is not a workflow.
    """
    spec = workflow_spec(wf)
    rec = recover_log(world.log, run_id)
    if rec.started is None:
        raise run_not_found(world, run_id)
    info = world.log.info(run_id)
    return await replay_recorded(spec, run_id, rec, world, info.status if info is not None else "running")


async def replay_recorded(
    spec: Spec, run_id: str, rec: Recorded, world: WorldCore, status: str, *, finished_too: bool = False
) -> DryResume:
    """``dry_resume`` over an index already read (``finished_too``: replay a finished run as well).

    A finished run replayed with ``finished_too`` must replay to its end: a
    call that would execute there is one the recorded run never made.
    """
    started = rec.started or {}
    models: dict[str, str] = started.get("models") or {}
    try:
        if started.get("workflow") != spec.name:
            raise ConfigurationError(
                f"run {run_id!r} belongs to workflow {started.get('workflow')!r}, not {spec.name!r}; "
                "check it with its own workflow."
            )
        value, _, _ = validate_input(spec, started.get("input"), run_id)
        model_drift = recorded_model_drift(run_id, rec.sessions, models)
        if model_drift is not None:
            raise model_drift
        accepted = set(rec.drift_keys)
        current = run_manifest(spec, models, memory_manifest(world))
        changes = run_drift(started, spec, models, rec, current=current)
        changes = [c for c in changes if c.key not in accepted]
        if changes:
            blockers = acceptance_blockers(changes, rec)
            drift = drift_error(run_id, changes, blockers)
            return DryResume(run_id, False, status=status, error=drift, changes=changes, blockers=blockers)
    except Exception as exc:  # what a real resume raises before anything runs
        return DryResume(run_id, False, status=status, error=exc)
    terminal = rec.terminal
    kind = None if terminal is None else terminal[0]
    if kind in (RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED) and not finished_too:
        return DryResume(run_id, True, status=status)  # a resume returns what it recorded
    if kind in (RUN_INTERRUPTED, RUN_CANCELLED, RUN_FAILED):
        # Replayed as far as where it stopped (a question an answered resume would go past,
        # or the question, sleep or call a cancellation or failure met it at).
        rec.terminal = None
    dry = _DryRun(_unconsuming(world), run_id, 0, rec, models)
    # As a real resume: calls recorded under an earlier signature of their function match it.
    dry.signatures = signature_changes(rec, current, started.get("manifest_hash") == manifest_hash(current))
    got = await _replay(spec, value, dry, status, kind)
    if kind == RUN_COMPLETED and got.ok and got.continues_at is not None:
        error = NondeterminismError(
            f"run {run_id!r} completed, but the current code makes a durable call at "
            f"{got.continues_at!r} that the recorded run never made: the code changed the calls "
            "of recorded runs. Guard the change with durable.patched(...), or version the workflow.",
            run_id=run_id,
            path=got.continues_at,
        )
        return DryResume(run_id, False, status=status, error=error)
    return got


async def _replay(spec: Any, value: Any, run: _DryRun, status: str, terminal: str | None) -> DryResume:
    scope = Scope(run, "")
    token = CURRENT.set(scope)
    rid = run.run_id
    try:
        args = (value,) if spec.params() else ()
        if spec.is_async:
            out = spec.fn(*args)
        else:
            out = call_sync_body(spec.fn, args, {}, what=f"workflow {spec.name!r}", run_id=rid, path="")
        if inspect.isawaitable(out):
            await out
    except _Frontier as stop:
        return DryResume(rid, True, stop.where, stop.waits, status)
    except RunInterrupted as exc:
        return DryResume(rid, True, exc.path, "an answer", status)
    except (NondeterminismError, CapabilityDriftError, UnknownCommitError) as exc:
        return DryResume(rid, False, status=status, error=exc)
    except Exception as exc:
        if terminal == RUN_FAILED:
            return DryResume(rid, True, status=status)  # its recorded failure, replayed
        return DryResume(rid, False, status=status, error=exc)
    finally:
        CURRENT.reset(token)
    return DryResume(rid, True, status=status)
