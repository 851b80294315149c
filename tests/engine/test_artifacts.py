"""Artifacts: content-addressed payloads, idempotent saves, large step outputs, integrity (both backends)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import ArtifactIntegrityError, ArtifactRef, ConfigurationError, World
from durable.engine._artifacts import check_artifacts
from durable.engine._recorded import Recorded
from durable.store import MemoryArtifacts
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on


class Crash(BaseException):
    """Stands in for a killed process."""


def _save(world: World, name: str, data: bytes, media_type: str | None = None) -> ArtifactRef:
    return asyncio.run(durable.save_artifact(name, data, media_type, world=world))


def _tamper(world: World, ref: ArtifactRef, data: bytes) -> None:
    if isinstance(world.artifacts, MemoryArtifacts):
        world.artifacts.blobs[ref.sha256] = data
    elif isinstance(world, durable.PostgresWorld):  # a row changed behind the library's back
        with world.db.pool.connection() as conn:
            conn.execute(
                world.db.sql("UPDATE {s}.artifacts SET data = %s WHERE sha256 = %s"), (data, ref.sha256)
            )
    else:
        assert ref.path is not None
        ref.path.write_bytes(data)


def test_saved_artifact_reads_back_with_its_hash(world: World) -> None:
    """``save_artifact`` returns a reference whose ``read()`` gives the bytes and whose hash is sha256."""
    ref = _save(world, "notes.txt", b"hello", "text/plain")
    assert ref.read() == b"hello"
    assert ref.sha256 == "sha256:" + hashlib.sha256(b"hello").hexdigest()
    assert (ref.name, ref.size, ref.media_type) == ("notes.txt", 5, "text/plain")


def test_local_artifact_lives_under_artifacts_with_a_json_manifest(tmp_path: Path) -> None:
    """On disk the payload sits at ``artifacts/<hex[:2]>/<hex>`` with its manifest beside it."""
    with durable.local_world(tmp_path) as world:
        ref = _save(world, "notes.txt", b"hello", "text/plain")
    hexdigest = ref.sha256.removeprefix("sha256:")
    assert ref.path == tmp_path / "artifacts" / hexdigest[:2] / hexdigest
    assert ref.path.read_bytes() == b"hello"
    manifest = json.loads(ref.path.with_suffix(".json").read_text())
    assert manifest == {
        "name": "notes.txt",
        "size": 5,
        "sha256": ref.sha256,
        "media_type": "text/plain",
        "run_id": None,
        "path": f"artifacts/{hexdigest[:2]}/{hexdigest}",
    }


def test_memory_artifact_has_no_path() -> None:
    """A memory world keeps artifacts in memory: no file, same bytes."""
    ref = _save(durable.memory_world(), "a", b"x")
    assert ref.path is None
    assert ref.read() == b"x"


def test_same_content_is_stored_once(world: World) -> None:
    """Two saves of the same bytes share one payload (content addressing)."""
    a = _save(world, "a", b"same")
    b = _save(world, "b", b"same")
    assert a.sha256 == b.sha256
    assert a.location == b.location


def test_read_detects_a_changed_payload(world: World) -> None:
    """``read()`` checks the hash and refuses a changed payload."""
    ref = _save(world, "a", b"original")
    _tamper(world, ref, b"tampered")
    with pytest.raises(ArtifactIntegrityError) as info:
        ref.read()
    assert info.value.expected == ref.sha256
    assert info.value.actual == "sha256:" + hashlib.sha256(b"tampered").hexdigest()


@pytest.mark.parametrize(
    ("name", "data", "media_type"),
    [("", b"x", None), ("a", "text", None), ("a", 3, None), ("a", b"x", 5)],
)
def test_bad_arguments_are_refused(world: World, name: Any, data: Any, media_type: Any) -> None:
    """A bad name, non-bytes data or a non-string media type raises ``ConfigurationError``."""
    with pytest.raises(ConfigurationError):
        _save(world, name, data, media_type)


def test_outside_a_run_a_world_is_required() -> None:
    """Outside a run ``save_artifact`` needs ``world=``."""
    with pytest.raises(ConfigurationError, match="world="):
        asyncio.run(durable.save_artifact("a", b"x"))


def test_artifact_threshold_must_be_a_non_negative_int() -> None:
    """A negative or non-int threshold is refused when the world is made."""
    with pytest.raises(ConfigurationError, match="artifact_threshold"):
        durable.memory_world(artifact_threshold=-1)


# -- inside a run ------------------------------------------------------------------------

WRITES: list[str] = []
STOP = {"on": True}


@durable.step
async def report(text: str) -> str:
    ref = await durable.save_artifact("report.md", text.encode(), "text/markdown")
    WRITES.append(ref.sha256)
    return ref.sha256


@durable.step
async def halt() -> None:
    if STOP["on"]:
        raise Crash()


@durable.workflow
async def publish(text: str) -> str:
    sha = await report(text)
    await halt()
    return sha


def _publish(world: World, text: str = "hello") -> str:
    result: str = asyncio.run(durable.run_workflow(publish, text, world=world, run_id="p1"))
    return result


@pytest.fixture(autouse=True)
def _reset() -> None:
    WRITES.clear()
    STOP["on"] = True


def test_save_in_a_run_is_a_recorded_effect(world: World) -> None:
    """Inside a run the save is an intent and a receipt holding the reference."""
    STOP["on"] = False
    sha = _publish(world)
    events = world.events("p1")
    intent = next(e for e in events if e.type == "effect.intent")
    receipt = next(e for e in events if e.type == "effect.receipt")
    assert (intent.kind, intent.name, intent.key) == ("tool", "save_artifact", "report.tool:save_artifact#0")
    assert receipt.result["sha256"] == sha
    assert receipt.result["run_id"] == "p1"


def test_artifact_of_a_crashed_run_is_replayed_not_rewritten(worlds: Worlds) -> None:
    """A resume replays the committed step that saved the artifact and checks its payload."""
    with pytest.raises(Crash):
        _publish(worlds.open())
    STOP["on"] = False
    sha = _publish(worlds.open())
    assert [sha] == WRITES


def test_tampered_artifact_stops_the_resume_before_anything_runs(worlds: Worlds) -> None:
    """A payload changed while the run was down fails the resume with ``ArtifactIntegrityError``."""
    world = worlds.open()
    with pytest.raises(Crash):
        _publish(world)
    ref = ArtifactRef.model_validate(
        next(e for e in world.events("p1") if e.type == "effect.receipt").result
    ).bound(world.artifacts)
    _tamper(world, ref, b"changed")
    STOP["on"] = False
    before = world.log.read("p1")
    with pytest.raises(ArtifactIntegrityError, match=r"report\.md"):
        _publish(worlds.open())
    assert worlds.open().log.read("p1") == before


# -- large step outputs ---------------------------------------------------------------------

COMPUTED: list[int] = []


@durable.step
async def rows(n: int) -> list[str]:
    COMPUTED.append(n)
    return [f"row {i}" for i in range(n)]


@durable.workflow
async def table(n: int) -> int:
    out = await rows(n)
    await halt()
    return len(out)


def test_large_step_output_goes_to_an_artifact_and_replays(worlds: Worlds) -> None:
    """An output longer than the threshold is stored as an artifact and replayed from it."""
    COMPUTED.clear()
    with pytest.raises(Crash):
        asyncio.run(durable.run_workflow(table, 50, world=worlds.open(artifact_threshold=100), run_id="t"))
    world = worlds.open(artifact_threshold=100)
    done = next(e for e in world.events("t") if e.type == "step.completed")
    assert done.output is None
    assert done.artifact is not None
    assert done.artifact["media_type"] == "application/json"
    STOP["on"] = False
    assert asyncio.run(durable.run_workflow(table, 50, world=world, run_id="t")) == 50
    assert COMPUTED == [50]


def test_small_step_output_stays_in_the_event(world: World) -> None:
    """An output under the threshold is kept inline; no artifact is made."""
    STOP["on"] = False
    assert asyncio.run(durable.run_workflow(table, 2, world=world, run_id="t")) == 2
    done = next(e for e in world.events("t") if e.type == "step.completed")
    assert done.output == ["row 0", "row 1"]
    assert done.artifact is None


def test_malformed_reference_in_the_log_is_refused(worlds: Worlds) -> None:
    """A reference whose hash is not ``sha256:<64 hex>`` (say ``../``) fails as damage, reading nothing."""
    world = worlds.open()
    with pytest.raises(Crash):
        _publish(world)
    rows = world.log.read("p1")
    seq, _, data = next(r for r in rows if r[1] == "effect.receipt")
    bad = json.loads(data)
    bad["result"]["sha256"] = "sha256:../../events.db"
    rec = Recorded.from_rows([(s, t, json.dumps(bad) if s == seq else d) for s, t, d in rows], "p1")
    with pytest.raises(ArtifactIntegrityError, match="malformed artifact reference"):
        check_artifacts(world, rec, "p1")


def test_save_cut_between_intent_and_receipt_is_redriven(worlds: Worlds) -> None:
    """A save whose receipt never became durable is re-driven (idempotent) and recorded once."""
    STOP["on"] = False
    with pytest.raises(SimulatedCrash):
        _publish(worlds.crashing(on("effect.receipt", '"sha256":"sha256:')))
    world = worlds.open()
    assert [e.type for e in world.events("p1")][-1] == "effect.intent"
    sha = _publish(world)
    events = world.events("p1")
    assert [e.type for e in events].count("effect.intent") == 1
    assert [e.type for e in events].count("effect.receipt") == 1
    ref = ArtifactRef.model_validate(next(e for e in events if e.type == "effect.receipt").result)
    assert ref.sha256 == sha
    assert ref.bound(world.artifacts).read() == b"hello"
