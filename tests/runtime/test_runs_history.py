"""Listings over a long history: filters and pages in the database, summaries read without a run's log."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable.cli import main
from durable.runtime._serving import short_hash
from durable.store import RunInfo
from durable.testing import CrashingLog
from tests.conftest import Worlds
from tests.runtime.test_runs_listing import where

FAILED, DONE = 30, 220
"""Failed runs first, then more completed ones than the inspector's first page holds."""


@durable.workflow
async def doomed(n: int) -> int:
    raise ValueError(f"no {n}")


@durable.workflow
async def fine(n: int) -> int:
    return n


async def _history(world: durable.World) -> None:
    for i in range(FAILED):
        with contextlib.suppress(ValueError):
            await durable.run_workflow(doomed, i, world=world, run_id=f"failed-{i:03}")
    for i in range(DONE):
        await durable.run_workflow(fine, i, world=world, run_id=f"done-{i:03}")


def _inspector(world: durable.World) -> Any:
    testclient = pytest.importorskip("starlette.testclient")  # the ui extra
    from durable.ui._app import Inspector, create_app

    return testclient.TestClient(create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787")


def _shown(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('data-run-id="')[1:]]


async def test_the_inspector_s_failed_filter_shows_failed_runs_older_than_its_page(worlds: Worlds) -> None:
    """Every failed run is listed though all of them are older than the newest 200 runs."""
    world = worlds.open()
    await _history(world)
    client = _inspector(world)
    failed = client.get("/", params={"status": "failed"})
    assert sorted(_shown(failed.text)) == [f"failed-{i:03}" for i in range(FAILED)]
    assert 'data-status="completed"' not in failed.text
    first = client.get("/")
    assert len(_shown(first.text)) == 200 and "failed-" not in first.text
    assert 'href="/?offset=200"' in first.text  # the rest are one "older" away
    older = client.get("/", params={"offset": "200"})
    assert len(_shown(older.text)) == FAILED + DONE - 200 and "older runs" not in older.text
    assert set(_shown(older.text)) >= {f"failed-{i:03}" for i in range(FAILED)}


async def test_runs_limit_pages_in_the_database_and_counts_what_it_left_out(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little runs --limit` and a status filter page from the database; the note counts the rest."""
    d = where(worlds)
    world = worlds.open()
    await _history(world)
    assert main(["runs", *d, "--limit", "20", "--json"]) == 0
    got = capsys.readouterr()
    rows = json.loads(got.out)
    assert [r["run_id"] for r in rows] == [f"done-{i:03}" for i in range(DONE - 1, DONE - 21, -1)]
    assert f"{FAILED + DONE - 20} more runs left out" in got.err
    assert main(["runs", *d, "--status", "failed", "--limit", "5", "--offset", "25", "--json"]) == 0
    got = capsys.readouterr()
    assert [r["run_id"] for r in json.loads(got.out)] == [f"failed-{i:03}" for i in range(4, -1, -1)]
    assert "25 more runs left out (--limit 5 --offset 25)" in got.err  # the newer ones it skipped


class _CountingLog(CrashingLog):
    """The world's log, counting the runs whose events are read."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.read_runs: list[str] = []

    def read(self, run_id: str, after_seq: int = 0) -> list[Any]:
        self.read_runs.append(run_id)
        return super().read(run_id, after_seq)

    def iter_rows(self, run_id: str, after_seq: int = 0) -> Iterator[Any]:
        self.read_runs.append(run_id)
        return super().iter_rows(run_id, after_seq)


async def test_a_listing_shows_each_run_s_code_version_from_its_summary(worlds: Worlds) -> None:
    """The code column comes from the run's summary: listing completed runs reads no run's log."""
    world = worlds.open()
    await _history(world)
    info = world.log.info("done-000")
    assert isinstance(info, RunInfo) and info.code is not None and info.code.startswith("sha256:")
    from durable.runtime import list_runs

    counting = _CountingLog(world.log)
    world.log = counting  # type: ignore[assignment]
    rows, left_out = list_runs(world, status="completed", workflow=None, limit=None, offset=0)
    assert len(rows) == DONE and left_out == 0
    assert {r["code"] for r in rows} == {short_hash(info.code)}
    assert counting.read_runs == []


async def test_runs_without_a_limit_streams_every_run_a_page_at_a_time(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little runs` without --limit prints what a limit as large as the history prints, read page by page."""
    from durable.runtime import iter_runs, list_runs

    d = where(worlds)
    world = worlds.open()
    await _history(world)
    every, _ = list_runs(world, status=None, workflow=None, limit=FAILED + DONE, offset=0)
    assert list(iter_runs(world, status=None, workflow=None, chunk=7)) == every
    failed = list(iter_runs(world, status="failed", workflow="doomed", chunk=4))
    assert [r["run_id"] for r in failed] == [f"failed-{i:03}" for i in range(FAILED - 1, -1, -1)]
    assert main(["runs", *d, "--json"]) == 0
    streamed = capsys.readouterr().out
    assert json.loads(streamed) == json.loads(json.dumps(every, default=str))
    assert main(["runs", *d, "--offset", "240"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUN_ID", "WORKFLOW", "CODE", "STATUS", "DRIVER", "CREATED"]
    assert [ln.split()[0] for ln in lines[1:]] == [f"failed-{i:03}" for i in range(9, -1, -1)]


async def test_gc_deletes_runs_a_batch_at_a_time_and_keeps_a_held_one(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many runs go in few transactions with every trace of them; a run a driver holds stays whole."""
    from durable.ops import _compaction

    monkeypatch.setattr(_compaction, "GC_BATCH", 4)
    world = worlds.open()
    ids = [f"q-{i}" for i in range(10)]
    for i, run_id in enumerate(ids):
        await durable.run_workflow(fine, i, world=world, run_id=run_id)
    held = world.locks.try_acquire("run:q-3")
    assert held is not None
    try:
        deleted = durable.gc(world=world, older_than=0)
    finally:
        world.locks.release(held)
    assert sorted(deleted) == sorted(r for r in ids if r != "q-3")
    assert [i.run_id for i in world.runs()] == ["q-3"]
    assert world.log.read("q-0") == []
    if worlds.kind == "sqlite":
        assert (worlds.data_dir / "events.db-wal").stat().st_size == 0  # checkpointed and cut
