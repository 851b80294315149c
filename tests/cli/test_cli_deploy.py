"""`little dry-resume`, `little export` and `durable.testing.replay_file`: new code checked against runs."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import CapabilityDriftError, ConfigurationError, NondeterminismError, RunInterrupted
from durable.cli import main
from durable.errors import LogFormatError
from durable.testing import replay_file

OLD = """
import durable

@durable.step
async def load(x: int) -> int:
    return x

@durable.step
async def save(x: int) -> int:
    return x * 10

@durable.workflow(name="deployed")
async def wf(x: int) -> int:
    y = await save(await load(x))
    if x < 0:
        return y
    return y + int(durable.interrupt("go?"))
"""

INSERTED_IN_THE_MIDDLE = OLD.replace(
    "await save(await load(x))", "await save(await load(await load2(x)))"
).replace(
    "@durable.workflow", "@durable.step\nasync def load2(x: int) -> int:\n    return x\n\n@durable.workflow"
)
INSERTED_AT_THE_END = OLD.replace(
    "    if x < 0:\n        return y", "    if x < 0:\n        return await notify(y)"
).replace(
    "@durable.workflow", "@durable.step\nasync def notify(x: int) -> int:\n    return x\n\n@durable.workflow"
)
NEW_SIGNATURE = OLD.replace("async def load(x: int) -> int:", "async def load(x: float) -> int:")
ADDED_DEFAULT = OLD.replace(
    "async def load(x: int) -> int:", "async def load(x: int, factor: int = 1) -> int:"
)


@pytest.fixture
def code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function that writes a module of workflow code and imports it as ``little`` would."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(text: str) -> tuple[str, Any]:
        name = f"deploy_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(text)
        __import__(name)
        return name, sys.modules[name]

    return write


def little(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(list(argv))
    return status, capsys.readouterr().out


def _interrupted(world: durable.World, wf: Any, run_id: str) -> None:
    with pytest.raises(RunInterrupted):
        asyncio.run(durable.run_workflow(wf, 1, world=world, run_id=run_id))


def test_dry_resume_exits_0_on_unchanged_code_and_1_on_changed_code(
    code: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--all checks every unfinished run; drift exits 1 with the key, unchanged code exits 0."""
    old_name, old = code(OLD)
    new_name, _ = code(NEW_SIGNATURE)
    world = durable.local_world(tmp_path / "data")
    for rid in ("a1", "a2"):
        _interrupted(world, old.wf, rid)
    before = [list(world.log.read(r)) for r in ("a1", "a2")]
    world.close()
    status, out = little(capsys, "dry-resume", f"{old_name}:wf", "--all", "--data-dir", "data")
    assert status == 0, out
    assert "a1: ok, continues at 'interrupt#2'" in out and "all 2 runs would go on" in out
    status, out = little(capsys, "dry-resume", f"{new_name}:wf", "a1", "--data-dir", "data", "--json")
    assert status == 1
    [got] = json.loads(out)["runs"]
    assert (got["ok"], got["error_type"], got["drift_keys"]) == (
        False,
        "CapabilityDriftError",
        ["steps.load.signature"],
    )
    world = durable.local_world(tmp_path / "data")
    assert [list(world.log.read(r)) for r in ("a1", "a2")] == before
    world.close()


def test_a_step_that_gained_a_defaulted_parameter_passes_a_dry_resume_as_it_does_a_resume(
    code: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The compatible change of the drift page: dry-resume says ok, and the real resume completes."""
    old_name, old = code(OLD)
    new_name, new = code(ADDED_DEFAULT)
    world = durable.local_world(tmp_path / "data")
    _interrupted(world, old.wf, "c1")
    world.close()
    status, out = little(capsys, "dry-resume", f"{new_name}:wf", "c1", "--data-dir", "data")
    assert status == 0, out
    assert "c1: ok, continues at 'interrupt#2'" in out
    world = durable.local_world(tmp_path / "data")
    assert asyncio.run(durable.run_workflow(new.wf, 1, world=world, run_id="c1", resume="5")) == 15
    world.close()


def test_dry_resume_needs_runs_or_all(capsys: pytest.CaptureFixture[str], code: Any) -> None:
    """Neither run ids nor --all is a usage error that shows both forms."""
    name, _ = code(OLD)
    status = main(["dry-resume", f"{name}:wf", "--data-dir", "data"])
    assert status != 0
    assert "--all" in capsys.readouterr().err


def test_an_exported_run_replays_with_its_code_and_catches_an_inserted_call(
    code: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """replay_file accepts the code that recorded the run and refuses code that inserts a call."""
    _, old = code(OLD)
    world = durable.local_world(tmp_path / "data")
    assert asyncio.run(durable.run_workflow(old.wf, -1, world=world, run_id="e1")) == -10
    world.close()
    status, out = little(capsys, "export", "e1", "--data-dir", "data")
    assert status == 0
    (tmp_path / "run.json").write_text(out)
    assert replay_file(tmp_path / "run.json", old.wf).ok
    _, middle = code(INSERTED_IN_THE_MIDDLE)
    with pytest.raises(NondeterminismError, match="position"):
        replay_file(tmp_path / "run.json", middle.wf)
    _, end = code(INSERTED_AT_THE_END)
    with pytest.raises(NondeterminismError, match="never made"):
        replay_file(tmp_path / "run.json", end.wf)
    _, signature = code(NEW_SIGNATURE)
    with pytest.raises(CapabilityDriftError, match=r"steps\.load\.signature"):
        replay_file(tmp_path / "run.json", signature.wf)


def test_replay_file_works_inside_an_async_test(code: Any, tmp_path: Path) -> None:
    """Called from a running event loop, replay_file still replays (in a thread of its own)."""
    _, old = code(OLD)
    world = durable.local_world(tmp_path / "data")
    asyncio.run(durable.run_workflow(old.wf, -1, world=world, run_id="e2"))
    (tmp_path / "run.json").write_text(json.dumps(durable.cli._deploy.export_run(world, "e2")))
    world.close()

    async def inside() -> bool:
        return replay_file(tmp_path / "run.json", old.wf).ok

    assert asyncio.run(inside())


def test_replay_file_refuses_a_file_that_is_not_an_export(code: Any, tmp_path: Path) -> None:
    """A missing file or another JSON document is refused with how to write an export."""
    _, old = code(OLD)
    with pytest.raises(ConfigurationError, match="little export"):
        replay_file(tmp_path / "missing.json", old.wf)
    (tmp_path / "other.json").write_text('{"rows": 1}')
    with pytest.raises(LogFormatError, match="little export"):
        replay_file(tmp_path / "other.json", old.wf)


def test_export_of_an_encrypted_run_needs_the_key(
    code: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the key the export fails (exit 1) and shows nothing of the run; with it the JSON is plain."""
    _, old = code(OLD)
    key = durable.EncryptionCodec.generate_key()
    world = durable.local_world(tmp_path / "data", codec=durable.EncryptionCodec(key))
    asyncio.run(durable.run_workflow(old.wf, -7, world=world, run_id="s1"))
    world.close()
    monkeypatch.delenv("LITTLE_KEY", raising=False)
    monkeypatch.delenv("LITTLE_KEY_FILE", raising=False)
    status, out = little(capsys, "export", "s1", "--data-dir", "data")
    assert status == 1 and "-70" not in out
    monkeypatch.setenv("LITTLE_KEY", base64.b64encode(key).decode())
    status, out = little(capsys, "export", "s1", "--data-dir", "data")
    assert status == 0
    data = json.loads(out)
    assert data["rows"][-1][1] == "run.completed" and data["rows"][-1][2]["output"] == -70
