"""Hostile run ids and names never address a path outside the data directory; locations are checked."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import durable
from durable.engine._sessions import folder_name
from durable.errors import ArtifactIntegrityError, ConfigurationError
from durable.ops._verify import verify_run
from durable.store.artifacts._protocol import safe_location

HOSTILE = [
    "../escape",
    "../../escape-further",
    "..",
    ".",
    "a/../../b",
    "a\\..\\..\\b",
    "line\nbreak",
    "nul\x00byte",
    "%2E%2E",
    "\x1b[2J",
]


@durable.workflow
async def writes_files(x: str) -> str:
    async with durable.session("worker"):
        folder = durable.scratch_dir()
        (folder / "notes.txt").write_text("draft")
    ref = await durable.save_artifact(x, b"payload of " + x.encode("utf-8", "surrogatepass"))
    return str(ref.sha256)


def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize("hostile", [*HOSTILE, "ABSOLUTE"])
def test_hostile_run_ids_and_artifact_names_write_only_inside_the_data_directory(
    tmp_path: Path, hostile: str
) -> None:
    data = tmp_path / "outer" / "inner" / "data"
    if hostile == "ABSOLUTE":
        hostile = str(tmp_path / "absolute-target")
    with durable.local_world(data) as world:
        asyncio.run(durable.run_workflow(writes_files, hostile, world=world, run_id=hostile))
        assert world.events(hostile)[-1].type == "run.completed"
    outside = {p for p in _all_files(tmp_path) if data not in p.parents and p != data}
    assert outside == {tmp_path / "outer", tmp_path / "outer" / "inner"}
    scratch = list((data / "runs").iterdir())
    assert len(scratch) == 1 and scratch[0].parent == data / "runs"


def test_folder_names_are_one_segment_and_distinct() -> None:
    parts = [*HOSTILE, "", "%", "a/b", "a%2Fb", "/abs", "\\abs", "a\x00", "a%00"]
    names = [folder_name(p) for p in parts]
    assert len(set(names)) == len(parts)  # different parts, different folders
    for n in names:
        assert n and n not in (".", "..") and "/" not in n and "\\" not in n and "\x00" not in n


def test_outer_loop_ids_that_could_name_a_path_are_refused(tmp_path: Path) -> None:
    from durable.outer._manifest import check_outer_loop_id

    for bad in ["../x", "/abs", "a/b", "..", ".hidden", "a\x00", "a\nb", ""]:
        with pytest.raises(ConfigurationError):
            check_outer_loop_id(bad)


@pytest.mark.parametrize(
    "location",
    ["../../etc/passwd", "/etc/passwd", "artifacts/../../x", "artifacts/ab/../../../x", "artifacts\\ab\\x"],
)
def test_a_location_outside_artifacts_is_refused_and_reported(tmp_path: Path, location: str) -> None:
    @durable.workflow
    async def saves() -> str:
        ref = await durable.save_artifact("a.txt", b"hello")
        return str(ref.location)

    with durable.local_world(tmp_path) as world:
        real = asyncio.run(durable.run_workflow(saves, world=world, run_id="r"))
    assert safe_location(real)
    db = sqlite3.connect(tmp_path / "events.db")
    for seq, data in db.execute("SELECT seq, data FROM events WHERE run_id = 'r'").fetchall():
        if real in data:
            db.execute(
                "UPDATE events SET data = ? WHERE run_id = 'r' AND seq = ?",
                (data.replace(json.dumps(real), json.dumps(location)), seq),
            )
    db.commit()
    db.close()
    with durable.local_world(tmp_path) as world:
        report = verify_run(world, "r")
        assert any("points outside" in p for p in report["problems"]), report["problems"]
        ref = durable.ArtifactRef(name="a.txt", sha256="sha256:" + "0" * 64, size=1, location=location).bound(
            world.artifacts
        )
        with pytest.raises(ArtifactIntegrityError, match="points outside"):
            _ = ref.path


def test_a_crafted_sha256_never_names_a_file() -> None:
    from durable.store.artifacts._protocol import hex_of

    for tag in ["sha256:../../x", "sha256:" + "0" * 63 + "/", "sha256:" + "A" * 64]:
        with pytest.raises(ValueError, match="not a sha256 tag"):
            hex_of(tag)
