"""Load the recorded runs under ``tests/data/`` into a world of either backend, and their code."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
from pathlib import Path

from durable import World
from durable.store import Append, MemoryArtifacts, PostgresArtifacts
from tests.conftest import Worlds

DATA = Path(__file__).parents[1] / "data"
RUN_ID = "run_recorded"


def load(worlds: Worlds, case: str) -> World:
    """A world holding the recorded case's runs and artifacts, as a restarted process finds them."""
    world = worlds.open()
    rows = [json.loads(line) for line in (DATA / case / "events.jsonl").read_text().splitlines()]
    runs: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        runs.setdefault(str(row["run_id"]), []).append(row)
    for run_id, run_rows in runs.items():
        first = run_rows[0]
        token = world.log.fence(run_id)
        stored = [(int(r["seq"]), str(r["type"]), json.dumps(r["data"])) for r in run_rows]  # type: ignore[call-overload]
        created = (str(first["workflow"]), first["parent_run_id"])
        world.log.append([Append(run_id, stored, token, str(first["status"]), created)])  # type: ignore[arg-type]
    for blob in sorted((DATA / case / "artifacts").rglob("*")):
        if not blob.is_file():
            continue
        if isinstance(world.artifacts, MemoryArtifacts):
            if blob.suffix != ".json":
                world.artifacts.blobs["sha256:" + blob.name] = blob.read_bytes()
        elif isinstance(world.artifacts, PostgresArtifacts):  # rows, stored as recorded (even if tampered)
            if blob.suffix != ".json":
                world.artifacts.put(blob.read_bytes(), {"sha256": "sha256:" + blob.name})
        else:
            assert world.data_dir is not None
            target = world.data_dir / blob.relative_to(DATA / case)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(blob, target)
    return world


def import_as(name: str, path: Path) -> types.ModuleType:
    """Import the file ``path`` as module ``name`` (for the whole test session).

    Recorded logs name functions by module; code recorded under one module name
    keeps it when its file moves.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
