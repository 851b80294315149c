"""Loading a run: its canonical state rebuilt from the log, the entry point of every resume."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ..errors import RunNotFoundError
from ..events import RUN_CANCELLED, RUN_COMPLETED, RUN_FAILED, RUN_INTERRUPTED, RUN_STARTED
from ..store import (
    EventLog,
)
from ._log_rows import WholeLogNeeded, check_start, from_start, parse_row
from ._recorded import Recorded
from ._world import WorldCore


def recover(run_id: str, *, world: WorldCore) -> Recorded:
    """Rebuild a run's canonical state: the newest snapshot plus the events after it.

    This is the same function the engine resumes from.

    Args:
        run_id: The run.
        world: The world holding its log.

    Returns:
        The run's index of committed outputs by path, confirmed effects,
        recorded values, status and state version (``Recorded.to_state()``
        gives it as JSON).

    Raises:
        RunNotFoundError: The world has no run with that id.
        LogCorruptedError: Its log does not begin with its start (nor a snapshot), or an
            event is damaged.

    Example:
        >>> import asyncio, durable
        >>> @durable.workflow
        ... async def hello() -> str:
        ...     return "hi"
        >>> world = durable.memory_world()
        >>> _ = asyncio.run(durable.run_workflow(hello, world=world, run_id="r1"))
        >>> durable.recover("r1", world=world).status()
        'completed'
    """
    rows = world.log.read(run_id)
    if not rows:
        raise run_not_found(world, run_id)
    check_start(rows[0][0], rows[0][1], run_id)
    return Recorded.from_rows(rows, run_id)


def unsafe_unconfirmed(rec: Recorded) -> list[str]:
    """Keys of unconfirmed tool calls that no resume may call again (plain tools).

    A tool counts as safe to call again when the run's manifest, or the
    manifest of a session that offers it, records it as idempotent or with a
    ``reconcile=`` function.
    """
    safe: set[str] = set()
    for name, d in (((rec.started or {}).get("manifest") or {}).get("tools") or {}).items():
        opts = d.get("options") or {}
        if opts.get("idempotent") or opts.get("reconcile"):
            safe.add(name)
    for session in rec.sessions.values():
        for t in (session.get("manifest") or {}).get("availableTools") or []:
            opts = t.get("options") or {}
            if opts.get("idempotent") or opts.get("reconcile"):
                safe.add(t.get("name"))
    return [
        k
        for k in rec.unconfirmed()
        if rec.intents[k].get("kind") == "tool" and rec.intents[k].get("name") not in safe
    ]


def recover_log(log: EventLog, run_id: str) -> Recorded:
    """``recover`` over a bare log (the runner's entry point); an unknown run is empty."""
    # Streaming the rows lets a long run be indexed without holding every raw
    # row at once. A restored run is re-indexed from earlier rows, so it is read whole.
    with contextlib.suppress(WholeLogNeeded):
        return Recorded.from_rows(from_start(log.iter_rows(run_id), run_id), run_id)
    return Recorded.from_rows(log.read(run_id), run_id)  # checked whole above


_OUTCOMES = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED, RUN_INTERRUPTED})


_NO_LAST_ROW: Any = object()


def _last_outcome(log: EventLog, run_id: str) -> Any:
    """The outcome ``(type, data)`` the run's last row holds.

    ``None``: the run has no row. ``_NO_LAST_ROW``: the log has no
    ``last_row``, or the last row is not an outcome (the whole log decides).
    """
    last = getattr(log, "last_row", None)
    row = None if last is None else last(run_id)
    if row is None:
        return _NO_LAST_ROW if last is None else None
    return (row[1], parse_row(row, run_id)) if row[1] in _OUTCOMES else _NO_LAST_ROW


def outcome_of(log: EventLog, run_id: str) -> tuple[str, Any] | None:
    """The run's last outcome ``(type, data)`` (``Recorded.terminal``); ``None`` when it has none.

    An ended run's outcome is its last row: a log that can give it
    (``last_row``) is read for that row alone; otherwise, or when the last
    row is not an outcome, the run is read whole.
    """
    found = _last_outcome(log, run_id)
    return recover_log(log, run_id).terminal if found is _NO_LAST_ROW else found


def completed_output(log: EventLog, run_id: str) -> tuple[bool, Any]:
    """``(True, output)`` when the run's last row is its ``run.completed``, else ``(False, None)``.

    A completed run stays completed, so a waiting handle that finds this
    needs no status read. A log without ``last_row`` says ``(False, None)``.
    """
    found = _last_outcome(log, run_id)
    if found is _NO_LAST_ROW or found is None or found[0] != RUN_COMPLETED:
        return False, None
    return True, found[1]["output"]


def run_not_found(world: WorldCore, run_id: str) -> RunNotFoundError:
    """The error of a run the world does not know, naming where it looked and how to list runs."""
    return RunNotFoundError(
        f"no run {run_id!r} in {world.where()}; list runs with `little runs`.",
        run_id=run_id,
    )


def first_started(world: WorldCore, run_id: str) -> dict[str, Any] | None:
    """The run's ``run.started`` data from its first row (``None``: the run has not started)."""
    first = next(iter(world.log.iter_rows(run_id)), None)
    if first is None or first[1] != RUN_STARTED:
        return None
    data: dict[str, Any] = json.loads(first[2])
    return data
