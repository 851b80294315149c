"""Time travel: list a run's checkpoints, restore a run to one, fork a new run from one.

A checkpoint is the moment right after a step committed: its ``seq`` is the
seq of that ``step.completed`` event. After a compaction the ``snapshot``
event is a checkpoint too (the oldest one left).

``restore`` appends ``run.restored``: recovery rolls the state back to the
checkpoint as a new committed transaction (the state version goes up; the
log is never rewritten), and the next resume runs again what came after.

``fork`` writes a new run whose log is its ``run.started`` (with ``fork_of``
and ``fork_seq``) and a ``snapshot`` of what the parent had committed at the
checkpoint; ``run_workflow`` with the fork's run id then replays that and
runs the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..engine import (
    ANY,
    Recorded,
    WorldCore,
    decode_state,
    encode_state,
    run_not_found,
    sha256_tag,
    to_json,
    until,
    value_hash,
)
from ..engine import new_run_id as fresh_run_id
from ..engine import payloads as ev
from ..errors import CheckpointNotFoundError, ConfigurationError
from ..events import RUN_RESTORED, RUN_STARTED, STEP_COMPLETED
from ..store import Append, Row
from ._call_inputs import read_inputs, self_contained
from ._compaction import locked


class _Unchanged:
    """The default of ``fork(input=...)``: keep the parent's input."""

    def __repr__(self) -> str:
        return "<the parent's input>"


UNCHANGED: Any = _Unchanged()
"""The default of ``fork(input=...)``: keep the parent's input."""


@dataclass(frozen=True)
class Checkpoint:
    """A point a run can be restored to or forked from.

    Attributes:
        seq: The seq of the event that made it (its identity).
        path: The step path that committed there (``""`` for a snapshot).
        kind: ``"step"`` or ``"snapshot"``.
        state_version: The run's state version at that point.
    """

    seq: int
    path: str
    kind: str
    state_version: int


@dataclass(frozen=True)
class Restored:
    """What ``restore`` did.

    Attributes:
        run_id: The run.
        checkpoint: The checkpoint it went back to.
        seq: The seq of the ``run.restored`` event.
        state_version: The new state version.
    """

    run_id: str
    checkpoint: Checkpoint
    seq: int
    state_version: int


@dataclass(frozen=True)
class Fork:
    """A run forked from a checkpoint of another, ready to run.

    Run it with ``run_workflow(wf, fork.input, world=world, run_id=fork.run_id,
    models=fork.models)``.

    Attributes:
        run_id: The new run's id.
        parent_run_id: The run it was forked from.
        checkpoint: The checkpoint it branches at.
        input: The new run's input (JSON form).
        models: The new run's model slot mapping.
        reused: The step paths and effect keys it inherits, in sorted order.
    """

    run_id: str
    parent_run_id: str
    checkpoint: Checkpoint
    input: Any
    models: dict[str, str]
    reused: list[str] = field(default_factory=list)


def checkpoints_of(rows: list[Row]) -> list[Checkpoint]:
    """The checkpoints among a run's ``rows`` (its whole log, or a part of it), oldest first."""
    found: list[Checkpoint] = []
    loads = json.loads
    for seq, type_, data in rows:
        if type_ == STEP_COMPLETED:
            d = loads(data)
            found.append(Checkpoint(seq, d["path"], "step", d["state_version"]))
        elif type_ == "snapshot":
            state = decode_state(loads(data)["state"])
            found = [Checkpoint(seq, "", "snapshot", state.get("state_version", 0))]
    return found


def _rows(world: WorldCore, run_id: str) -> list[Row]:
    rows = world.log.read(run_id)
    if not rows:
        raise run_not_found(world, run_id)
    return rows


def checkpoints(run_id: str, *, world: WorldCore) -> list[Checkpoint]:
    """Every point the run can be restored to or forked from, oldest first.

    Args:
        run_id: The run.
        world: The world holding its log.

    Returns:
        One checkpoint per committed step (and one for a compaction snapshot).

    Raises:
        RunNotFoundError: The world has no run with that id.
    """
    return checkpoints_of(_rows(world, run_id))


def _find(run_id: str, rows: list[Row], checkpoint: int | str) -> Checkpoint:
    """The checkpoint named by its seq (an int or digits) or by its step path (the latest)."""
    found = checkpoints_of(rows)
    wanted: int | str = checkpoint
    if isinstance(checkpoint, str) and checkpoint.isdigit():
        wanted = int(checkpoint)
    if isinstance(wanted, bool) or not isinstance(wanted, int | str):
        raise ConfigurationError(
            f"a checkpoint is a seq (int) or a step path (str), not {checkpoint!r}; "
            f"list them with `little checkpoints {run_id}`."
        )
    for cp in reversed(found):
        if (cp.seq if isinstance(wanted, int) else cp.path) == wanted:
            return cp
    raise CheckpointNotFoundError(
        f"run {run_id!r} has no checkpoint {checkpoint!r}; list its checkpoints first with "
        f"`little checkpoints {run_id}` (or durable.checkpoints) and pass a seq or a step path "
        "from that list.",
        run_id=run_id,
    )


def restore(run_id: str, checkpoint: int | str, *, world: WorldCore) -> Restored:
    """Roll a run's state back to a checkpoint; the next resume runs again what came after.

    Appends one ``run.restored`` event (the log is never rewritten): recovery
    gives the state as it was at the checkpoint, with a new, higher state
    version, and the run's status becomes ``running``. Steps and effects
    committed after the checkpoint run again on the next ``run_workflow`` with
    the same run id; effects keep their idempotency keys.

    Args:
        run_id: The run (not one being driven right now).
        checkpoint: A checkpoint's seq, or a step path (its latest checkpoint).
        world: The world holding the run's log.

    Returns:
        The checkpoint, the seq of the ``run.restored`` event and the new state version.

    Raises:
        RunNotFoundError: The world has no run with that id.
        CheckpointNotFoundError: The run has no such checkpoint (list them first).
        RunFailedError: Another caller is driving the run right now.
    """
    with locked(world, run_id, "restore") as token:
        rows = _rows(world, run_id)
        cp = _find(run_id, rows, checkpoint)
        version = Recorded.from_rows(rows, run_id).state_version + 1
        seq = rows[-1][0] + 1
        event = (seq, RUN_RESTORED, ev.text(ev.run_restored(cp.seq, version)))
        world.log.append([Append(run_id, [event], token, status="running")])
    return Restored(run_id, cp, seq, version)


def fork(
    run_id: str,
    checkpoint: int | str,
    *,
    world: WorldCore,
    new_run_id: str | None = None,
    input: Any = UNCHANGED,
    models: dict[str, str] | None = None,
) -> Fork:
    """Start a new run from a checkpoint of another, reusing what was committed before it.

    The new run records its parent and checkpoint (``fork_of``, ``fork_seq``)
    and inherits every step and confirmed effect committed up to the
    checkpoint, keyed by path, so nothing before the branch point is paid for
    again. Run it with ``run_workflow(wf, fork.input, world=world,
    run_id=fork.run_id, models=fork.models)``.

    The rule for a changed input: an inherited result is reused only when
    the fork makes the call at its path with the same arguments (the same
    input hash). A call whose arguments changed, typically because they are
    derived from the new input, runs again, as does everything after the
    checkpoint. A call that does not take the input is reused.

    Args:
        run_id: The parent run.
        checkpoint: A checkpoint's seq, or a step path (its latest checkpoint).
        world: The world holding both runs.
        new_run_id: The new run's id (a fresh one when ``None``).
        input: The new run's input (default: the parent's).
        models: The new run's model slot mapping (default: the parent's).

    Returns:
        The new run's id, input and models, and what it inherits.

    Raises:
        RunNotFoundError: The world has no run ``run_id``.
        CheckpointNotFoundError: The parent has no such checkpoint (list them first).
        ConfigurationError: ``new_run_id`` is already used or not a non-empty string.
        SerializationError: ``input`` cannot be stored as JSON.
    """
    rows = _rows(world, run_id)
    cp = _find(run_id, rows, checkpoint)
    at = Recorded.from_rows(until(rows, cp.seq, run_id), run_id)
    rid = new_run_id if new_run_id is not None else fresh_run_id()
    if not isinstance(rid, str) or not rid:
        raise ConfigurationError(f"new_run_id must be a non-empty string, not {rid!r}.")
    started = {k: v for k, v in (at.started or {}).items() if k not in ("parent_run_id", "parent_key")}
    started["fork_of"], started["fork_seq"] = run_id, cp.seq
    if input is not UNCHANGED:
        data = to_json(ANY, input, what="the fork's input", run_id=rid, path="")
        started["input"], started["input_hash"] = data, value_hash(data)
    if models is not None:
        if not isinstance(models, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in models.items()
        ):
            raise ConfigurationError(f"models must map slot names to model names, not {models!r}.")
        manifest = dict(started.get("manifest", {}))
        manifest["models"] = dict(sorted(models.items()))
        started["models"], started["manifest"] = dict(models), manifest
        started["manifest_hash"] = sha256_tag(manifest)
    inherited = at.inherited(started)
    self_contained(inherited, read_inputs(world, run_id, until(rows, cp.seq, run_id)))
    state = inherited.to_state()
    snapshot = ev.snapshot(encode_state(state), sha256_tag(state), 2)
    with locked(world, rid, "fork into") as token:
        if world.log.read(rid):
            raise ConfigurationError(
                f"run id {rid!r} is already used in this world; fork with another new_run_id."
            )
        rows_out = [(1, RUN_STARTED, ev.text(started)), (2, "snapshot", ev.text(snapshot))]
        world.log.append(
            [
                Append(
                    rid,
                    rows_out,
                    token,
                    status="running",
                    created=(started.get("workflow", ""), None),
                    code=started.get("manifest_hash"),
                )
            ]
        )
    return Fork(
        run_id=rid,
        parent_run_id=run_id,
        checkpoint=cp,
        input=started.get("input"),
        models=dict(started.get("models", {})),
        reused=sorted([*inherited.steps_completed, *inherited.receipts]),
    )
