"""`little runs` on SQLite and Postgres: every run newest first, what --limit left out, one reason."""

from __future__ import annotations

import asyncio
import json

import pytest

import durable
from durable import RunCancelledError
from durable.cli import main
from tests.conftest import Worlds


@durable.workflow
async def quick(n: int) -> int:
    return n


@durable.workflow
async def sleeper(n: int) -> int:
    for _ in range(n):
        await durable.sleep(0.01)
    return n


@durable.workflow
async def parent_of_sleeper(n: int) -> int:
    return await sleeper(n)


def where(worlds: Worlds) -> list[str]:
    """The options that point `little` at the world's storage."""
    if worlds.kind == "memory":
        pytest.skip("little reads a data directory or a Postgres schema, not a memory world")
    if worlds.kind == "postgres":
        assert worlds.dsn is not None and worlds.schema is not None
        return ["--dsn", worlds.dsn, "--schema", worlds.schema]
    return ["--data-dir", str(worlds.data_dir)]


def little_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[object, str]:
    assert main([*argv, "--json"]) == 0
    got = capsys.readouterr()
    return json.loads(got.out), got.err


@pytest.mark.parametrize("how", ["cancel", "deadline"])
async def test_a_child_cancelled_through_its_live_parent_shows_its_reason(
    worlds: Worlds, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """The child's reason in `little runs --json` and its table is the one its status_detail() gives."""
    d = where(worlds)
    world = worlds.open()
    deadline = 0.3 if how == "deadline" else None
    h = durable.start_workflow(parent_of_sleeper, 10_000, world=world, deadline=deadline)
    for _ in range(100_000):
        if [r for r in world.runs() if r.parent_run_id == h.run_id]:
            break
        await asyncio.sleep(0.005)
    if how == "cancel":
        await h.cancel()
    with pytest.raises(RunCancelledError):
        await h.result()
    reason = "requested" if how == "cancel" else "deadline"
    (child,) = [r for r in world.runs() if r.parent_run_id == h.run_id]
    detail = await durable.handle(child.run_id, world=world).status_detail()
    assert (detail.status, detail.reason) == ("cancelled", reason)
    rows, _ = little_json(capsys, "runs", *d)
    assert isinstance(rows, list)
    by_id = {r["run_id"]: r for r in rows}
    assert (by_id[child.run_id]["status"], by_id[child.run_id]["reason"]) == ("cancelled", reason)
    assert by_id[h.run_id]["reason"] == reason
    assert main(["runs", *d]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(child.run_id)]
    assert f"({reason})" in line


async def test_runs_lists_every_run_newest_first_and_says_how_many_limit_left_out(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """260 runs: without --limit all of them newest first; --limit 25 lists 25 and says 235 were left out."""
    d = where(worlds)
    world = worlds.open()
    ids = [f"r{i:03d}" for i in range(260)]
    for rid in ids:
        await durable.run_workflow(quick, 1, world=world, run_id=rid)
    rows, err = little_json(capsys, "runs", *d)
    assert isinstance(rows, list)
    assert [r["run_id"] for r in rows] == ids[::-1]
    assert "left out" not in err
    rows, err = little_json(capsys, "runs", *d, "--limit", "25")
    assert isinstance(rows, list)
    assert [r["run_id"] for r in rows] == ids[::-1][:25]
    assert "235 more runs left out" in err
    assert main(["runs", *d, "--limit", "25"]) == 0
    out = capsys.readouterr().out
    assert out.count("completed") == 25
    assert "235 more runs left out (--limit 25); pass --limit 260 to list them all" in out
