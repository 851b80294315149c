"""Damaged logs: typed errors naming the run and the event, committed work intact, verify findings."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.cli import main
from durable.errors import DurableControl, DurableError, LogCorruptedError, LogUnavailableError
from durable.ops._verify import verify_run
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on

CALLS: Counter[str] = Counter()


@durable.step
async def fetch(i: int) -> dict[str, Any]:
    CALLS[f"fetch{i}"] += 1
    return {"i": i, "text": "x" * 50}


@durable.tool(idempotent=True)  # its receipt may be lost with the crash: re-driving it is safe
async def send(i: int) -> int:
    CALLS[f"send{i}"] += 1
    return i * 10


@durable.workflow
async def pipeline(n: int) -> int:
    total = 0
    for i in range(n):
        async with durable.branch(str(i)):
            total += (await fetch(i))["i"] + await send(i)
    return total


def rows_of(world: durable.World, run_id: str) -> list[tuple[int, str, str]]:
    return world.log.read(run_id)


def rewrite(worlds: Worlds, run_id: str, seq: int, data: str) -> None:
    """Replace one stored payload as a damaged file (or a hand edit) would."""
    if worlds.kind == "memory":
        log = worlds._memory_log
        assert log is not None
        stored = log._rows[run_id]
        i = next(i for i, r in enumerate(stored) if r[0] == seq)
        stored[i] = (seq, stored[i][1], data)
        return
    db = sqlite3.connect(worlds.data_dir / "events.db")
    db.execute("UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (data, run_id, seq))
    db.commit()
    db.close()


def _crash_and_find(worlds: Worlds) -> tuple[int, str]:
    """Run ``pipeline`` to a crash before branch 2's fetch commits; return the last row (seq, data)."""
    CALLS.clear()
    done = asyncio.run(durable.run_workflow(pipeline, 2, world=worlds.open(), run_id="done"))
    assert done == 11
    world = worlds.crashing(on("step.completed", '"path":"[2].fetch"'))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(pipeline, 3, world=world, run_id="r"))
    rows = rows_of(worlds.open(), "r")
    last = next(r for r in reversed(rows) if r[1] == "step.completed")
    return last[0], last[2]


def _without(data: str, key: str) -> str:
    return json.dumps({k: v for k, v in json.loads(data).items() if k != key})


DAMAGE: dict[str, Callable[[str], str]] = {
    "truncated": lambda data: data[: len(data) // 2],
    "no_path": lambda data: _without(data, "path"),
    "no_state_version": lambda data: _without(data, "state_version"),
    "no_output": lambda data: _without(data, "output"),
    "not_an_object": lambda data: "7",
    "deeply_nested": lambda data: '{"path":' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_event_is_a_typed_error_naming_run_and_seq(worlds: Worlds, damage: str) -> None:
    """Resume, events and verify name the damaged event; other runs and the other events are intact."""
    seq, original = _crash_and_find(worlds)
    rewrite(worlds, "r", seq, DAMAGE[damage](original))
    before = dict(CALLS)

    world = worlds.open()
    with pytest.raises(LogCorruptedError, match=rf"run 'r': event {seq} \(step.completed\)") as err:
        asyncio.run(durable.run_workflow(pipeline, 3, world=world, run_id="r"))
    assert err.value.run_id == "r"
    assert "little verify r" in str(err.value)
    if damage == "no_output":  # the schema allows it (an output held as an artifact): hash finding
        assert seq in [e.seq for e in world.events("r")]
    else:
        with pytest.raises(LogCorruptedError, match=rf"event {seq}"):
            world.events("r")
    report = verify_run(world, "r")
    assert not report["ok"]
    assert any(f"event {seq}" in p for p in report["problems"])
    assert before == CALLS  # nothing ran: no step, no tool

    # The other run is untouched, and so is the rest of this one: with the event put back,
    # the resume replays every committed call and runs only what never committed.
    assert asyncio.run(durable.run_workflow(pipeline, 2, world=world, run_id="done")) == 11
    rewrite(worlds, "r", seq, original)
    assert asyncio.run(durable.run_workflow(pipeline, 3, world=worlds.open(), run_id="r")) == 33
    assert CALLS["fetch0"] == CALLS["fetch1"] == before["fetch0"]  # committed: replayed, not run
    assert CALLS["fetch2"] == 2 and CALLS["send2"] == 1
    assert verify_run(worlds.open(), "r")["ok"]


def test_the_cli_reports_a_damaged_event_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little verify`, `events` and `replay` print findings or one line, never a traceback."""
    worlds = Worlds("sqlite", tmp_path)
    seq, original = _crash_and_find(worlds)
    rewrite(worlds, "r", seq, _without(original, "path"))
    for w in worlds.opened:
        w.close()
    worlds.opened.clear()
    data = str(worlds.data_dir)
    assert main(["verify", "r", "--data-dir", data]) == 1
    out = capsys.readouterr()
    assert f"event {seq}" in out.out and "NOT OK" in out.out
    for command in (["events", "r"], ["replay", "r"]):
        assert main([*command, "--data-dir", data]) == 1
        err = capsys.readouterr().err
        assert err.startswith("little: run 'r': event") and "Traceback" not in err


def _pristine(tmp_path: Path) -> Path:
    """A data directory with three finished runs, its WAL checked into events.db."""
    base = tmp_path / "pristine"
    with durable.local_world(base) as world:
        for run_id in ("a", "b", "c"):
            asyncio.run(durable.run_workflow(pipeline, 4, world=world, run_id=run_id))
    db = sqlite3.connect(base / "events.db")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return base


def test_random_byte_flips_give_typed_errors_or_findings(tmp_path: Path) -> None:
    """Seeded bit flips anywhere in events.db: every failure is a durable error or a verify finding."""
    base = _pristine(tmp_path)
    original = (base / "events.db").read_bytes()
    rng = random.Random(14)
    raw: list[str] = []
    for i in range(80):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 6)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        d = tmp_path / f"flip{i}"
        d.mkdir()
        (d / "events.db").write_bytes(bytes(damaged))
        try:
            with durable.local_world(d) as world:
                for run_id in ("a", "b", "c"):
                    with contextlib.suppress(DurableError, DurableControl):
                        asyncio.run(durable.run_workflow(pipeline, 4, world=world, run_id=run_id))
        except DurableError:
            pass
        except Exception as exc:  # the defect this test is about
            raw.append(f"flip {i}: {type(exc).__name__}: {exc}")
        for command in (["verify", "a"], ["events", "b"], ["replay", "c"], ["runs"]):
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    status = main([*command, "--data-dir", str(d)])
            except BaseException as exc:
                raw.append(f"flip {i}: little {command[0]}: {type(exc).__name__}: {exc}")
                continue
            assert status in (0, 1)
            assert "Traceback" not in err.getvalue()
        shutil.rmtree(d)
    assert raw == []


def _fill(world: durable.World, spare_pages: int) -> None:
    db = world.log._db  # type: ignore[attr-defined]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages + spare_pages}")


@durable.step
async def page(i: int) -> str:
    CALLS[f"page{i}"] += 1
    return f"{i:04d}" + "x" * 1500


@durable.workflow
async def writer(n: int) -> int:
    for i in range(n):
        async with durable.branch(str(i)):
            await page(i)
    return n


def _full_then_resume(data_dir: Path, limit: Callable[[durable.World], None] | None) -> None:
    CALLS.clear()
    with durable.local_world(data_dir, artifact_threshold=10**9) as world:
        if limit is not None:
            limit(world)
        with pytest.raises(
            LogUnavailableError, match=r"run 'full': writing events from seq \d+: the disk"
        ) as err:
            asyncio.run(durable.run_workflow(writer, 300, world=world, run_id="full"))
        assert err.value.run_id == "full"
    committed = sum(CALLS.values())
    assert 0 < committed < 300
    return None


def test_a_full_disk_is_a_typed_error_and_the_run_resumes(tmp_path: Path) -> None:
    """SQLITE_FULL (a real one, from max_page_count) stops the run; with room again it resumes."""
    _full_then_resume(tmp_path / "d", lambda w: _fill(w, 30))
    ran = dict(CALLS)
    with durable.local_world(tmp_path / "d") as world:
        assert world.log.integrity_check() == "ok"  # type: ignore[attr-defined]
        assert asyncio.run(durable.run_workflow(writer, 300, world=world, run_id="full")) == 300
        assert verify_run(world, "full")["ok"]
    # Each step ran once, except the one whose commit the full disk refused.
    assert sum(CALLS.values()) == 301
    assert max(CALLS.values()) == 2 and list(CALLS.values()).count(2) == 1
    assert all(CALLS[f"page{i}"] == 1 for i in range(len(ran) - 1))


@contextlib.contextmanager
def _small_disk(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
        )
    except OSError:
        done = None
    if done is None or done.returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_really_full_file_system_is_a_typed_error(tmp_path: Path) -> None:
    """On a 256 KiB tmpfs the disk really fills: a typed error, a sound log, and a resume once moved."""
    with _small_disk(tmp_path / "small", "256k") as disk:
        _full_then_resume(disk / "data", None)
        with durable.local_world(disk / "data") as world:
            assert world.log.integrity_check() == "ok"  # type: ignore[attr-defined]
            status = world.log.info("full")
            assert status is not None and status.status == "running"
        shutil.copytree(disk / "data", tmp_path / "moved")
    with durable.local_world(tmp_path / "moved") as world:
        assert asyncio.run(durable.run_workflow(writer, 300, world=world, run_id="full")) == 300


def _fill_disk(disk: Path) -> Path:
    """Write a file until the file system holding ``disk`` has no byte left; returns that file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"x" * 512):
                pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("log", ["existing", "new"])
def test_a_full_disk_at_open_is_unavailable_not_corruption(tmp_path: Path, log: str) -> None:
    """A log opened on a full disk is LogUnavailableError, not corruption; with room again it runs."""
    with _small_disk(tmp_path / "small", "256k") as disk:
        data = disk / "data"
        CALLS.clear()
        if log == "existing":
            with durable.local_world(data) as world:
                assert asyncio.run(durable.run_workflow(writer, 3, world=world, run_id="full")) == 3
        filler = _fill_disk(disk)
        with pytest.raises(LogUnavailableError) as err, durable.local_world(data):
            pass
        assert "full" in str(err.value) and "Move it aside" not in str(err.value)
        assert "Free some space" in str(err.value)
        filler.unlink()
        with durable.local_world(data) as world:  # the advice, followed, works: nothing was lost
            assert world.log.integrity_check() == "ok"  # type: ignore[attr-defined]
            assert asyncio.run(durable.run_workflow(writer, 3, world=world, run_id="full")) == 3
    assert sum(CALLS.values()) == 3  # each step ran once, whichever open came first


def test_a_full_disk_when_the_control_store_is_first_opened_says_so(tmp_path: Path) -> None:
    """handle.status() on a full disk names the disk and its OS error, not a lock; with room, it works."""
    with _small_disk(tmp_path / "small", "256k") as disk, durable.local_world(disk / "data") as world:
        assert asyncio.run(durable.run_workflow(writer, 1, world=world, run_id="r")) == 1
        filler = _fill_disk(disk)  # runtime.db is opened by the first look at the runtime
        with pytest.raises(LogUnavailableError) as err:
            asyncio.run(durable.handle("r", world=world).status())
        text = str(err.value)
        assert "runtime.db" in text and "is full (" in text and "locked" not in text
        assert "not damaged" in text and "Free some space" in text
        filler.unlink()  # the advice, followed
        assert asyncio.run(durable.handle("r", world=world).status()) == "completed"
