"""``little rekey`` SIGKILLed at a point of its work, then run again: finished, nothing lost, no plaintext."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import durable
from durable.cli import main

pytest.importorskip("cryptography")

KEY = bytes(range(32))
NEW = bytes(range(2, 34))
RUNS = [f"run-{i}" for i in range(6)]

# The child runs `little rekey` with one function wrapped to SIGKILL the process at the named point.
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import durable.ops._rekey as rekey
    from durable.store.artifacts._protocol import FileArtifacts
    from durable.store.log._sqlite import SqliteLog
    from durable.cli import main

    point, data = sys.argv[1], sys.argv[2]
    kill = lambda: os.kill(os.getpid(), signal.SIGKILL)

    def after_puts(n):
        put, calls = FileArtifacts.put, []
        def counted(self, *a, **k):
            out = put(self, *a, **k)
            calls.append(1)
            if len(calls) == n:
                kill()  # the new copy is written, the old one not removed yet
            return out
        FileArtifacts.put = counted

    def before(module, name):
        setattr(module, name, lambda *a, **k: kill())

    if point == "events-committed":
        SqliteLog.vacuum = lambda self: kill()  # the rows are rewritten, the file not vacuumed
    elif point.startswith("artifact-"):
        after_puts(int(point.rpartition("-")[2]))
    elif point == "outer-loops":
        before(rekey, "_rewrite_outer")  # every artifact done, the outer loops not started
    elif point == "runtime":
        before(rekey, "_rewrite_runtime")
    sys.exit(main(["rekey", "--data-dir", data, *sys.argv[3:]]))
    """
)


@durable.step
async def echo(x: str) -> str:
    return x + " SECRET-VALUE"


@durable.workflow
async def wf(x: str) -> str:
    ref = await durable.save_artifact(x, (x + " SECRET-ARTIFACT").encode())
    return await echo(x) + ref.read().decode()


def _fill(data: Path, codec: durable.Codec | None) -> None:
    with durable.local_world(data, codec=codec) as world:
        for rid in RUNS:
            asyncio.run(durable.run_workflow(wf, rid, world=world, run_id=rid))


def _env(key: bytes, old: bytes | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITTLE_")}
    env["LITTLE_KEY"] = key.hex()
    if old is not None:
        env["LITTLE_OLD_KEYS"] = old.hex()
    return env


def _rekey_killed(data: Path, point: str, env: dict[str, str], *flags: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, point, str(data), *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def _plaintext_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and b"SECRET" in p.read_bytes()]


def _check_finished(data: Path, codec: durable.Codec | None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not (data / "rekey-journal.json").exists()
    if codec is None:
        monkeypatch.delenv("LITTLE_KEY", raising=False)
    monkeypatch.delenv("LITTLE_OLD_KEYS", raising=False)
    assert main(["verify", "--all", "--data-dir", str(data)]) == 0
    with durable.local_world(data, codec=codec) as world:
        for rid in RUNS:
            out = asyncio.run(durable.run_workflow(wf, rid, world=world, run_id=rid))
            assert out == f"{rid} SECRET-VALUE{rid} SECRET-ARTIFACT"


@pytest.mark.parametrize("point", ["events-committed", "artifact-1", "artifact-4", "outer-loops", "runtime"])
def test_a_killed_encryption_is_finished_by_a_rerun(
    tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plaintext directory whose rekey was SIGKILLed at ``point`` is fully encrypted by a rerun."""
    _fill(tmp_path, None)
    _rekey_killed(tmp_path, point, _env(KEY, None))
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0, capsys.readouterr().err
    assert _plaintext_files(tmp_path) == []
    _check_finished(tmp_path, durable.EncryptionCodec(KEY), monkeypatch)


@pytest.mark.parametrize("point", ["events-committed", "artifact-3"])
def test_a_killed_rotation_is_finished_by_a_rerun(
    tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rotation SIGKILLed at ``point`` is finished by a rerun: every payload under the new key only."""
    _fill(tmp_path, durable.EncryptionCodec(KEY))
    _rekey_killed(tmp_path, point, _env(NEW, KEY))
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0, capsys.readouterr().err
    assert _plaintext_files(tmp_path) == []
    with pytest.raises(durable.KeyMismatchError):  # the old key alone no longer opens it
        durable.local_world(tmp_path, codec=durable.EncryptionCodec(KEY))
    _check_finished(tmp_path, durable.EncryptionCodec(NEW), monkeypatch)


def test_a_killed_decryption_is_finished_by_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decryption SIGKILLed halfway through the artifacts is finished by a rerun with the same key."""
    _fill(tmp_path, durable.EncryptionCodec(KEY))
    _rekey_killed(tmp_path, "artifact-3", _env(KEY, None), "--decrypt")
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    assert main(["rekey", "--decrypt", "--data-dir", str(tmp_path)]) == 0, capsys.readouterr().err
    _check_finished(tmp_path, None, monkeypatch)


def test_a_stopped_rekey_refuses_another_target_until_it_is_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rerun towards another key than the stopped rekey's names the key that finishes it."""
    _fill(tmp_path, None)
    _rekey_killed(tmp_path, "artifact-2", _env(KEY, None))
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert durable.EncryptionCodec(KEY).key_id in err and "finish" in err
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    monkeypatch.delenv("LITTLE_OLD_KEYS")
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0
    assert _plaintext_files(tmp_path) == []


def test_a_rotated_data_directory_reads_whole_under_the_new_key_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every value ``fill`` marks (blocked errors, debounced inputs, memory) reads with the new key alone."""
    from tests.helpers.audit_world import MARKS, fill, goes_on

    with durable.local_world(tmp_path, codec=durable.EncryptionCodec(KEY), artifact_threshold=256) as world:
        fill(world, memory=True)
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0
    files = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert [m for m in MARKS.values() if any(m.encode() in f for f in files)] == []
    with pytest.raises(durable.KeyMismatchError):
        durable.local_world(tmp_path, codec=durable.EncryptionCodec(KEY))
    new = durable.EncryptionCodec(NEW)
    goes_on(lambda clock: durable.local_world(tmp_path, codec=new, clock=clock), memory=True)
