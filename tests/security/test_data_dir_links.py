"""A symbolic link planted in a data directory is refused, never followed: nothing outside it changes.

Each place the data directory has (its folders, listed from the code, and
the files durable writes there) gets a link to a folder or a file outside;
the write, the read that precedes it, or ``little gc``'s delete raises
``DataDirectoryError`` naming the link, and the outside stays as it was.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import durable
from durable import DataDirectoryError, Done
from durable.cli import main
from durable.engine._sessions import folder_name
from durable.worlds._local import LAYOUT

PAYLOAD = b"an artifact's payload"
HEX = hashlib.sha256(PAYLOAD).hexdigest()


@durable.workflow
async def saves(x: str) -> str:
    ref = await durable.save_artifact("a.txt", PAYLOAD)
    return ref.sha256


@durable.workflow
async def scratches(x: str) -> str:
    async with durable.session("worker"):
        folder = durable.scratch_dir()
        (folder / "notes.txt").write_text("draft")
    return str(folder)


@durable.workflow
async def plain(x: str) -> str:
    return x


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, a folder's marker (links are not followed)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), folder)] = "folder"
        for name in filenames:
            p = Path(dirpath) / name
            out[os.path.relpath(p, folder)] = p.read_bytes() if not p.is_symlink() else "link"
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the data directory, with a file a link could lead a write to."""
    folder = tmp_path / "outside"
    (folder / HEX[:2]).mkdir(parents=True)
    (folder / "victim.txt").write_text("keep me")
    (folder / HEX[:2] / HEX).write_bytes(b"someone else's file")
    (folder / HEX[:2] / f"{HEX}.json").write_bytes(b"someone else's manifest")
    return folder


def _link(at: Path, to: Path) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(to, at)


def test_the_layout_names_every_folder_the_code_makes(tmp_path: Path) -> None:
    """The folders and files a used data directory holds beside its databases are the ones LAYOUT checks."""
    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(saves, "x", world=world, run_id="a"))
        asyncio.run(durable.run_workflow(scratches, "x", world=world, run_id="s"))
        asyncio.run(
            durable.run_outer_loop(
                plain, "x", supervise=lambda c: Done(c.output), max_cycles=1, outer_loop_id="L", world=world
            )
        )
        durable.start_workflow(plain, "x", world=world, run_id="q", queue="q")
        world.memory.configure(durable.lexical_embedder(dim=8))
        asyncio.run(world.memory.put(("n",), "k", "text"))

        async def worker() -> None:
            async with durable.Worker(world, workflows=[plain], queues=["q"]):
                await durable.handle("q", world=world).result(timeout=30)

        asyncio.run(worker())
    made = {p.name for p in tmp_path.iterdir() if p.is_dir()}
    assert made <= set(LAYOUT) and made >= {"artifacts", "bells", "locks", "memory", "outer-loops", "runs"}


@pytest.mark.parametrize("name", LAYOUT)
def test_a_data_directory_with_a_linked_folder_or_file_is_not_opened(
    tmp_path: Path, outside: Path, name: str
) -> None:
    """A link at any folder or file of the layout: local_world refuses, naming it, and changes nothing."""
    data = tmp_path / "data"
    _link(data / name, outside if "." not in name else outside / "victim.txt")
    before = _tree(outside)
    with pytest.raises(DataDirectoryError, match="symbolic link") as info:
        durable.local_world(data)
    assert info.value.path == str(data / name)
    assert _tree(outside) == before


@pytest.mark.parametrize("name", ["events.db", "events.db-wal", "runtime.db", "runtime.db-wal"])
def test_a_linked_database_or_journal_is_not_opened(tmp_path: Path, outside: Path, name: str) -> None:
    """SQLite opens by path: the files and their journals are checked, and refused, before it does."""
    data = tmp_path / "data"
    with durable.local_world(data) as world:
        asyncio.run(durable.run_workflow(plain, "x", world=world, run_id="r"))
    for suffix in ("-wal", "-shm"):
        (data / f"events.db{suffix}").unlink(missing_ok=True)
    target = outside / "victim.txt"
    if (data / name).exists():
        (data / name).unlink()
    _link(data / name, target)
    before = _tree(outside)

    async def queued(world: durable.World) -> None:
        durable.start_workflow(plain, "y", world=world, queue="q")

    with pytest.raises(DataDirectoryError, match="symbolic link"), durable.local_world(data) as world:
        asyncio.run(queued(world))  # runtime.db opens with the control store
    assert _tree(outside) == before


# -- each place, linked while the world is open ----------------------------------------------

Plant = Callable[[Path, Path], None]


def _in_artifacts(sub: str) -> Plant:
    def plant(data: Path, outside: Path) -> None:
        if sub == "folder":
            _link(data / "artifacts" / HEX[:2], outside / HEX[:2])
        elif sub == "blob":
            _link(data / "artifacts" / HEX[:2] / HEX, outside / HEX[:2] / HEX)
        else:
            _link(data / "artifacts" / HEX[:2] / f"{HEX}.json", outside / HEX[:2] / f"{HEX}.json")

    return plant


PLACES: dict[str, tuple[Plant, Callable[[durable.World], object]]] = {
    "artifacts/": (
        lambda data, outside: _link(data / "artifacts", outside),
        lambda w: asyncio.run(durable.run_workflow(saves, "x", world=w, run_id="a")),
    ),
    "artifacts/<2 hex>/": (
        _in_artifacts("folder"),
        lambda w: asyncio.run(durable.run_workflow(saves, "x", world=w, run_id="a")),
    ),
    "an artifact file": (
        _in_artifacts("blob"),
        lambda w: asyncio.run(durable.run_workflow(saves, "x", world=w, run_id="a")),
    ),
    "an artifact's manifest": (
        _in_artifacts("manifest"),
        lambda w: asyncio.run(durable.run_workflow(saves, "x", world=w, run_id="a")),
    ),
    "runs/": (
        lambda data, outside: _link(data / "runs", outside),
        lambda w: asyncio.run(durable.run_workflow(scratches, "x", world=w, run_id="s")),
    ),
    "runs/<id>/": (
        lambda data, outside: _link(data / "runs" / "s", outside),
        lambda w: asyncio.run(durable.run_workflow(scratches, "x", world=w, run_id="s")),
    ),
    "runs/<id>/harness/": (
        lambda data, outside: _link(data / "runs" / "s" / "harness", outside),
        lambda w: asyncio.run(durable.run_workflow(scratches, "x", world=w, run_id="s")),
    ),
    "runs/<id>/harness/<session>/": (
        lambda data, outside: _link(
            data / "runs" / "s" / "harness" / folder_name("session:worker#0"), outside
        ),
        lambda w: asyncio.run(durable.run_workflow(scratches, "x", world=w, run_id="s")),
    ),
    "locks/": (
        lambda data, outside: _link(data / "locks", outside),
        lambda w: asyncio.run(durable.run_workflow(plain, "x", world=w, run_id="r")),
    ),
    "locks/held.lock": (
        lambda data, outside: _link(data / "locks" / "held.lock", outside / "victim.txt"),
        lambda w: asyncio.run(durable.run_workflow(plain, "x", world=w, run_id="r")),
    ),
    "memory/": (
        lambda data, outside: _link(data / "memory", outside),
        lambda w: w.memory,
    ),
    "memory/memory.db": (
        lambda data, outside: _link(data / "memory" / "memory.db", outside / "victim.txt"),
        lambda w: w.memory,
    ),
    "outer-loops/": (
        lambda data, outside: _link(data / "outer-loops", outside),
        lambda w: asyncio.run(
            durable.run_outer_loop(
                plain, "x", supervise=lambda c: Done(1), max_cycles=1, outer_loop_id="L", world=w
            )
        ),
    ),
    "outer-loops/<id>.json": (
        lambda data, outside: _link(data / "outer-loops" / "L.json", outside / "victim.txt"),
        lambda w: asyncio.run(
            durable.run_outer_loop(
                plain, "x", supervise=lambda c: Done(1), max_cycles=1, outer_loop_id="L", world=w
            )
        ),
    ),
}
"""Each place a data directory has (from the code), how a link is planted there, and what writes there."""


@pytest.mark.parametrize("place", PLACES)
def test_a_link_planted_in_an_open_world_is_refused_for_writes(
    tmp_path: Path, outside: Path, place: str
) -> None:
    """Planted after the world opened (past its check): the write raises, naming the link; outside intact."""
    plant, write = PLACES[place]
    data = tmp_path / "data"
    before = _tree(outside)
    with durable.local_world(data) as world:
        plant(data, outside)
        with pytest.raises(DataDirectoryError, match="symbolic link") as info:
            write(world)
    assert str(data) in str(info.value) and info.value.path is not None
    assert os.path.islink(info.value.path)
    assert _tree(outside) == before


def test_a_linked_bells_folder_gets_no_socket_and_the_worker_polls(tmp_path: Path, outside: Path) -> None:
    """bells/ linked after the world opened: no socket is bound where it points; queued runs still run."""
    data = tmp_path / "data"
    before = _tree(outside)

    async def run() -> str:
        with durable.local_world(data) as world:
            _link(data / "bells", outside)
            h = durable.start_workflow(plain, "x", world=world, queue="q")
            async with durable.Worker(world, workflows=[plain], queues=["q"]):
                out: str = await h.result(timeout=30)
                return out

    assert asyncio.run(run()) == "x"
    assert _tree(outside) == before


# -- little gc -----------------------------------------------------------------------------


def _with_an_orphan_artifact(data: Path) -> None:
    """A finished run that saved an artifact: ``little gc --older-than 0s`` deletes both."""
    with durable.local_world(data) as world:
        asyncio.run(durable.run_workflow(saves, "x", world=world, run_id="a"))
    assert (data / "artifacts" / HEX[:2] / HEX).is_file()


@pytest.mark.parametrize("where", ["artifacts/", "artifacts/<2 hex>/", "an artifact file", "a manifest"])
def test_little_gc_refuses_to_delete_through_a_link(
    tmp_path: Path, outside: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gc of a run whose artifact's place is a link: the delete is refused with the link's name."""
    data = tmp_path / "data"
    _with_an_orphan_artifact(data)
    artifacts = data / "artifacts"
    if where == "artifacts/":
        os.rename(artifacts, tmp_path / "moved")
        _link(artifacts, outside)
    elif where == "artifacts/<2 hex>/":
        os.rename(artifacts / HEX[:2], tmp_path / "moved")
        _link(artifacts / HEX[:2], outside / HEX[:2])
    else:
        name = HEX if where == "an artifact file" else f"{HEX}.json"
        (artifacts / HEX[:2] / name).unlink()
        _link(artifacts / HEX[:2] / name, outside / HEX[:2] / name)
    before = _tree(outside)
    assert main(["gc", "--older-than", "0s", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err
    assert "symbolic link" in err and str(data / "artifacts") in err
    assert _tree(outside) == before
