"""`verify` checks every recorded output against its output_hash, and snapshots against their state_hash."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import durable
from durable.cli import main
from durable.engine._snapshots import decode_state, encode_state
from durable.ops._verify import verify_run
from tests.conftest import Worlds


@durable.step
async def price(item: str) -> dict[str, int]:
    return {"cents": 500, "qty": len(item)}


@durable.workflow
async def checkout(item: str) -> int:
    p = await price(item)
    return p["cents"] * p["qty"]


def rewrite(worlds: Worlds, run_id: str, seq: int, data: str) -> None:
    """Replace one stored payload, as a hand edit of the file would."""
    if worlds.kind == "memory":
        assert worlds._memory_log is not None
        stored = worlds._memory_log._rows[run_id]
        i = next(i for i, r in enumerate(stored) if r[0] == seq)
        stored[i] = (seq, stored[i][1], data)
        return
    db = sqlite3.connect(worlds.data_dir / "events.db")
    db.execute("UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (data, run_id, seq))
    db.commit()
    db.close()


def _row(world: durable.World, run_id: str, type_: str) -> tuple[int, str]:
    seq, _, data = next(r for r in world.log.read(run_id) if r[1] == type_)
    return seq, data


def _edited_output(data: str, output: object) -> str:
    d = json.loads(data)
    d["output"] = output
    return json.dumps(d)


def test_an_edited_step_output_is_a_finding_naming_run_seq_and_path(worlds: Worlds) -> None:
    """Changing a committed output in the log (what a resume would return) fails verify."""
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(checkout, "book", world=world, run_id="r")) == 2000
    assert verify_run(world, "r")["ok"]
    seq, data = _row(world, "r", "step.completed")
    rewrite(worlds, "r", seq, _edited_output(data, {"cents": 5, "qty": 4}))
    report = verify_run(worlds.open(), "r")
    assert not report["ok"]
    assert report["problems"] == [
        f"run 'r': event {seq} (step.completed) at path 'price': the output does not match its "
        "recorded output_hash; the log was edited or damaged, and a resume would return the "
        "changed output"
    ]


def test_an_edited_run_output_is_a_finding(worlds: Worlds) -> None:
    """The run's own recorded output is checked the same way."""
    world = worlds.open()
    asyncio.run(durable.run_workflow(checkout, "book", world=world, run_id="r"))
    seq, data = _row(world, "r", "run.completed")
    rewrite(worlds, "r", seq, _edited_output(data, 1))
    problems = verify_run(worlds.open(), "r")["problems"]
    assert problems == [
        f"run 'r': event {seq} (run.completed): the output does not match its recorded "
        "output_hash; the log was edited or damaged, and a resume would return the changed output"
    ]


def test_a_compacted_run_verifies_and_an_edited_snapshot_does_not(worlds: Worlds) -> None:
    """A snapshot's state is checked against its state_hash; an untouched one passes."""
    world = worlds.open()
    asyncio.run(durable.run_workflow(checkout, "book", world=world, run_id="r"))
    durable.compact("r", world=world)
    assert verify_run(world, "r")["ok"]
    seq, data = _row(world, "r", "snapshot")
    d = json.loads(data)
    state = decode_state(d["state"])
    state["steps_completed"]["price"]["output"] = {"cents": 1, "qty": 4}
    d["state"] = encode_state(state)
    rewrite(worlds, "r", seq, json.dumps(d))
    problems = verify_run(worlds.open(), "r")["problems"]
    assert len(problems) == 1
    assert problems[0].startswith(
        f"run 'r': event {seq} (snapshot): the state does not match its recorded state_hash"
    )


def test_little_verify_exits_1_on_an_edited_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI prints the finding and exits 1."""
    worlds = Worlds("sqlite", tmp_path)
    world = worlds.open()
    asyncio.run(durable.run_workflow(checkout, "book", world=world, run_id="r"))
    seq, data = _row(world, "r", "step.completed")
    world.close()
    rewrite(worlds, "r", seq, _edited_output(data, {"cents": 50_000, "qty": 4}))
    assert main(["verify", "r", "--data-dir", str(worlds.data_dir)]) == 1
    out = capsys.readouterr().out
    assert "NOT OK" in out and f"event {seq} (step.completed) at path 'price'" in out
