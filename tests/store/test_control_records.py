"""Control records built from a store's rows and changed by a claim equal the dataclass's own."""

from __future__ import annotations

import dataclasses

import pytest

from durable.store import ControlRecord
from durable.store.control._protocol import changed, claimed_by, record_of


def _row() -> tuple[object, ...]:
    rec = ControlRecord("r1", "wf", input='{"a": 1}', queue="q", priority=3, seq=7, drives=2)
    return dataclasses.astuple(rec)


def test_a_record_from_a_row_equals_the_initialised_one() -> None:
    """``record_of`` builds the same frozen record as ``ControlRecord(*row)``."""
    row = _row()
    rec = record_of(row)
    assert rec == ControlRecord(*row)
    assert hash(rec) == hash(ControlRecord(*row))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.state = "done"  # type: ignore[misc]


def test_a_short_row_still_gets_the_defaults() -> None:
    """A row with fewer columns than fields falls back to the initialiser and its defaults."""
    rec = record_of(("r1", "wf"))
    assert rec == ControlRecord("r1", "wf")


def test_a_changed_record_equals_replace_and_leaves_the_old_one() -> None:
    """``changed`` gives what ``dataclasses.replace`` gives, and the old record is unchanged."""
    old = record_of(_row())
    new = claimed_by(old, "w1", 42, "host", 100.0)
    assert new == dataclasses.replace(
        old, state="claimed", owner="w1", pid=42, host="host", claimed_at=100.0, drives=3, driven_at=100.0
    )
    assert old.state == "enqueued" and old.drives == 2


def test_changing_an_unknown_field_is_refused() -> None:
    """A name that is not a field raises ``TypeError`` instead of adding an attribute."""
    with pytest.raises(TypeError, match="no field 'stat'"):
        changed(record_of(_row()), stat="done")
