"""``little``: escaped terminal output, keys from the environment only, and ``little rekey``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import durable
from durable.cli import build_group, main
from durable.cli._safe import escape

pytest.importorskip("cryptography")

KEY = bytes(range(32))
NEW = bytes(range(2, 34))
EVIL = ["evil\x1b[2J", "forged\rRUN_ID  wf  completed", "two\nlines", "bidi\u202eeurt", "bell\x07"]


@durable.step
async def echo(x: str) -> str:
    return x + " SECRET-VALUE"


@durable.workflow
async def wf(x: str) -> str:
    ref = await durable.save_artifact(x, b"SECRET-ARTIFACT")
    return await echo(x) + ref.read().decode()


def _fill(data: Path, codec: durable.Codec | None = None) -> None:
    with durable.local_world(data, codec=codec) as world:
        for rid in EVIL:
            asyncio.run(durable.run_workflow(wf, rid, world=world, run_id=rid))


def _assert_clean(text: str) -> None:
    for bad in ("\x1b", "\r", "\u202e", "\x07"):
        assert bad not in text


def test_escape_leaves_plain_text_alone_and_escapes_the_rest() -> None:
    assert escape("runs/r1 é ✓") == "runs/r1 é ✓"
    assert escape("a\x1b[2J") == "a\\x1b[2J"
    assert escape("a\rb\nc\t") == "a\\rb\\nc\\t"
    assert escape("x\u202ey\u2028") == "x\\u202ey\\u2028"


@pytest.mark.parametrize("command", [["runs"], ["events", EVIL[1]], ["replay", EVIL[0]], ["verify", EVIL[2]]])
def test_run_ids_and_values_with_control_characters_print_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    _fill(tmp_path)
    status = main([command[0], "--data-dir", str(tmp_path), *command[1:]])
    out = capsys.readouterr()
    assert status == 0, out.err
    _assert_clean(out.out + out.err)
    if command == ["runs"]:
        lines = out.out.splitlines()
        assert len(lines) == 1 + len(EVIL)  # a header and one line per run: no forged rows
        assert any("forged\\rRUN_ID" in line for line in lines)


def test_errors_naming_a_hostile_run_id_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path)
    assert main(["events", "--data-dir", str(tmp_path), "missing\x1b[2J\rX"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    _assert_clean(err)


def test_json_output_escapes_control_characters_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path)
    assert main(["runs", "--json", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    _assert_clean(out)
    assert {r["run_id"] for r in json.loads(out)} == set(EVIL)


def test_no_command_takes_a_key_option() -> None:
    """A key never goes on a command line (other users can read it): no option names one."""
    import click

    group = build_group()
    options = [opt for p in group.params for opt in p.opts]
    for command in group.commands.values():
        options += [opt for p in command.params if isinstance(p, click.Option) for opt in p.opts]
    assert any(o == "--data-dir" for o in options)  # the scan sees every command's options
    assert [o for o in options if "key" in o.lower()] == []


def test_little_reads_the_key_from_the_environment_or_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _fill(data, durable.EncryptionCodec(KEY))
    monkeypatch.delenv("LITTLE_KEY", raising=False)
    assert main(["runs", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err
    assert durable.EncryptionCodec(KEY).key_id in err and "LITTLE_KEY" in err
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    assert main(["runs", "--data-dir", str(data)]) == 0
    capsys.readouterr()
    monkeypatch.delenv("LITTLE_KEY")
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    monkeypatch.setenv("LITTLE_KEY_FILE", str(key_file))
    assert main(["verify", "--data-dir", str(data), EVIL[0]]) == 0
    monkeypatch.setenv("LITTLE_KEY_FILE", str(tmp_path / "nowhere"))
    assert main(["runs", "--data-dir", str(data)]) == 1
    assert "cannot read the key file" in capsys.readouterr().err


def _plaintext_anywhere(root: Path) -> bool:
    return any(b"SECRET" in p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_rekey_encrypts_rotates_and_decrypts_a_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path)
    assert _plaintext_anywhere(tmp_path)
    monkeypatch.setenv("LITTLE_KEY", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0
    assert not _plaintext_anywhere(tmp_path)  # events.db vacuumed, WAL truncated, artifacts rewritten
    assert main(["verify", "--data-dir", str(tmp_path), EVIL[0]]) == 0
    # Rotate: the new key in LITTLE_KEY, the old one in LITTLE_OLD_KEYS.
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    monkeypatch.setenv("LITTLE_OLD_KEYS", KEY.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert not _plaintext_anywhere(tmp_path)
    with pytest.raises(durable.KeyMismatchError):  # the old key alone no longer opens it
        durable.local_world(tmp_path, codec=durable.EncryptionCodec(KEY))
    with durable.local_world(tmp_path, codec=durable.EncryptionCodec(NEW)) as world:
        out = asyncio.run(durable.run_workflow(wf, EVIL[0], world=world, run_id=EVIL[0]))
        assert out == EVIL[0] + " SECRET-VALUESECRET-ARTIFACT"
    monkeypatch.delenv("LITTLE_OLD_KEYS")
    assert main(["rekey", "--decrypt", "--data-dir", str(tmp_path)]) == 0
    monkeypatch.delenv("LITTLE_KEY")
    assert main(["verify", "--data-dir", str(tmp_path), EVIL[1]]) == 0
    with durable.local_world(tmp_path) as world:
        assert asyncio.run(durable.run_workflow(wf, EVIL[1], world=world, run_id=EVIL[1])).endswith(
            "ARTIFACT"
        )


def test_rekey_without_the_current_key_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path, durable.EncryptionCodec(KEY))
    before = (tmp_path / "events.db").read_bytes()
    monkeypatch.setenv("LITTLE_KEY", NEW.hex())
    assert main(["rekey", "--data-dir", str(tmp_path)]) == 1
    assert durable.EncryptionCodec(KEY).key_id in capsys.readouterr().err
    assert (tmp_path / "events.db").read_bytes() == before
