"""The compaction property: recovery from the compacted log equals recovery from the full log."""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings

import durable
from durable import World
from durable.engine._recorded import Recorded, start_of
from durable.engine._values import dumps
from durable.store import Append
from tests.helpers.strategies import event_programs

Ops = list[tuple[str, dict[str, Any]]]


def _append(world: World, run_id: str, seq: int, kind: str, data: dict[str, Any]) -> None:
    token = world.log.fence(run_id)
    created = ("wf", None) if kind == "run.started" else None
    world.log.append([Append(run_id, [(seq, kind, dumps(data))], token, created=created)])


def build(world: World, run_id: str, ops: Ops, at: int, compact: bool) -> None:
    """Write ``ops`` as a run's log, compacting after the first ``at`` of them when ``compact``.

    Each ``run.restored`` is aimed at an earlier ``step.completed`` that a log
    compacted at ``at`` still holds; one with no such target is left out
    (of both logs alike).
    """
    compact_at = at if compact else None
    seqs: dict[int, int] = {}
    version = 0
    seq = 0
    for i, (kind, data) in enumerate(ops):
        if compact_at is not None and i == compact_at:
            durable.compact(run_id, world=world)
            seq += 1
        if kind == "run.restored":
            lowest = at if i >= at else 0
            targets = [seqs[j] for j in sorted(seqs) if j >= lowest]
            if not targets:
                continue
            version += 1
            data = {"checkpoint": targets[data["target"] % len(targets)], "state_version": version}
        elif kind == "step.completed":
            version += 1
            data = {**data, "state_version": version}
        seq += 1
        if kind == "step.completed":
            seqs[i] = seq
        _append(world, run_id, seq, kind, data)
    if compact_at == len(ops):
        durable.compact(run_id, world=world)


def index(rec: Recorded) -> dict[str, Any]:
    """Every attribute the engine resumes from: all of ``Recorded`` but the log position.

    A step start is compared as ``step.started`` records it: a completion with its
    start folded in stands for that start in the index of the log that holds it.
    """
    got = {
        f.name: getattr(rec, f.name)
        for f in dataclasses.fields(rec)
        if f.name not in ("last_seq", "_positions")
    }
    got["steps_started"] = {p: start_of(d) for p, d in rec.steps_started.items()}
    return got


def states(world: World, ops: Ops, compact_at: int) -> tuple[dict[str, Any], dict[str, Any]]:
    build(world, "full", ops, compact_at, compact=False)
    build(world, "compacted", ops, compact_at, compact=True)
    return (
        index(durable.recover("full", world=world)),
        index(durable.recover("compacted", world=world)),
    )


@settings(max_examples=200, deadline=None)
@given(event_programs())
def test_recovery_after_compact_equals_recovery_from_the_full_log(program: tuple[Ops, int]) -> None:
    """For random event sequences, the compacted log recovers to the full log's state."""
    ops, at = program
    full, compacted = states(durable.memory_world(), ops, at)
    assert compacted == full


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_programs())
def test_recovery_after_compact_equals_full_on_sqlite(program: tuple[Ops, int]) -> None:
    """The same property holds for the SQLite log in a real file."""
    ops, at = program
    with tempfile.TemporaryDirectory() as tmp, durable.local_world(tmp) as world:
        full, compacted = states(world, ops, at)
    assert compacted == full


@settings(max_examples=100, deadline=None)
@given(event_programs())
def test_compacting_again_at_the_end_keeps_the_state(program: tuple[Ops, int]) -> None:
    """A second compaction of an already compacted log changes nothing in its state."""
    ops, at = program
    world = durable.memory_world()
    _, compacted = states(world, ops, at)
    durable.compact("compacted", world=world)
    assert index(durable.recover("compacted", world=world)) == compacted


@given(event_programs())
def test_state_survives_a_json_round_trip(program: tuple[Ops, int]) -> None:
    """from_state(to_state()) rebuilds an index with the same state and status."""
    ops, _ = program
    world = durable.memory_world()
    build(world, "r", ops, 0, compact=False)
    rec = durable.recover("r", world=world)
    again = Recorded.from_state(rec.to_state())
    assert index(again) == index(rec)
    assert again.status() == rec.status()
    assert again.state_hash() == rec.state_hash()
