"""A run's calls read from a world: what ``little diff`` aligns and the inspector's tree shows.

``read_calls`` does the I/O (the run's rows, the step outputs stored as
artifacts, and each call's input rebuilt by ``_call_inputs``); what it
returns is plain data for the pure ``_run_diff``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from ..engine import Recorded, WorldCore, referenced, run_not_found
from ..errors import ArtifactIntegrityError
from ..store import Row
from ._call_inputs import RECORDED, InputReader, read_inputs
from ._run_diff import Call, calls_of, first_seqs


@dataclass
class RunCalls:
    """A run as the diff and the inspector's tree read it.

    Attributes:
        run_id: The run.
        recorded: Its recorded index (the canonical state, large outputs read back).
        events: Its events as JSON data, in seq order.
        calls: Its calls by path, in the order they were first written.
        missing_artifacts: Why a referenced artifact could not be read (``None`` when all were).
    """

    run_id: str
    recorded: Recorded
    events: list[dict[str, Any]]
    calls: dict[str, Call]
    missing_artifacts: str | None = None


def read_calls(world: WorldCore, run_id: str, rows: list[Row] | None = None) -> RunCalls:
    """Read a run's calls from ``world``.

    Args:
        world: The world.
        run_id: The run.
        rows: The run's rows when the caller read them already: its whole log, or
            its last rows only (the inspector's page of a long run), which gives
            the calls those rows record.

    Raises:
        RunNotFoundError: The world has no such run.
        KeyMismatchError: The run's events are encrypted under a key the world does not hold.
    """
    if rows is None:
        rows = world.log.read(run_id)
    if not rows:
        raise run_not_found(world, run_id)
    rec = Recorded.from_rows(rows, run_id)
    missing = _inline_outputs(world, rec, run_id)
    events = _events(rows)
    calls = with_inputs(calls_of(rec, _order(world, rec, events)), read_inputs(world, run_id, rows))
    return RunCalls(run_id, rec, events, calls, missing)


def with_inputs(calls: dict[str, Call], reader: InputReader) -> dict[str, Call]:
    """The calls with their recorded inputs (steps and effects; other kinds take no arguments)."""
    out = {}
    for path, call in calls.items():
        if call.input_hash is not None:
            got = reader.get(call.kind, path)
            note = got.stored if got.state == RECORDED else got.problem
            call = replace(call, input=got.value, input_state=got.state, input_note=note)
        out[path] = call
    return out


def _inline_outputs(world: WorldCore, rec: Recorded, run_id: str) -> str | None:
    """Put each step output stored as an artifact back in the index; say why one could not be read.

    Only outputs are read (not every saved artifact), and not checked against
    their hash: ``little verify`` does that, and a page refreshed live should not.
    """
    missing = None
    try:
        refs = referenced(rec, run_id)
    except ArtifactIntegrityError as exc:  # a malformed reference: the tree shows the raw event
        return str(exc).splitlines()[0]
    for ref, path in refs:
        if path is None:
            continue
        data = world.artifacts.get(ref.sha256)
        if data is None:
            missing = f"the output of {path} (artifact {ref.sha256}) is missing from the artifact store"
            continue
        try:
            rec.inline_output(path, json.loads(data))
        except ValueError:
            missing = f"the output of {path} (artifact {ref.sha256}) is not JSON"
    return missing


def _events(rows: list[Row]) -> list[dict[str, Any]]:
    events = []
    for seq, type_, data in rows:
        d = json.loads(data)
        d["seq"], d["type"] = seq, type_
        events.append(d)
    return events


def _order(world: WorldCore, rec: Recorded, events: list[dict[str, Any]]) -> dict[str, int]:
    """The first seq of each path; a fork's inherited calls take their place in the parent's log."""
    own = first_seqs(events)
    started = rec.started or {}
    parent, at = started.get("fork_of"), started.get("fork_seq")
    if not isinstance(parent, str) or not isinstance(at, int):
        return own
    parent_rows = world.log.read(parent)  # gone after a gc: inherited calls then come first, by position
    order = {p: s for p, s in first_seqs(_events(parent_rows)).items() if s <= at}
    return order | {p: s + at for p, s in own.items()}
