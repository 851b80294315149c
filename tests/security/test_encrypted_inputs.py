"""Call inputs in an encrypted world: sealed in the log and the artifacts, readable with the key, rekeyed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import durable
from durable import EncryptionCodec
from durable.ops import read_calls, rekey
from durable.ops._verify import verify_run

pytest.importorskip("cryptography")

KEY = bytes(range(32))
NEW = bytes(range(3, 35))
MARK = b"ZEBRA-CALL-INPUT"


@durable.model_call(slot="worker", name="chat")
async def chat(messages: list[str]) -> str:
    return f"reply {len(messages)}"


@durable.workflow(name="sealed-loop")
async def sealed_loop(turns: int) -> int:
    messages = [MARK.decode() + " " + "m" * 1100]
    async with durable.session("worker"):
        for i in range(turns):
            messages += [await chat(messages), f"{MARK.decode()} turn {i}"]
    return len(messages)


def _leaks(root: Path) -> list[str]:
    return [
        str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_file() and MARK in p.read_bytes()
    ]


def _inputs(world: durable.World) -> list[object]:
    return [c.input for c in read_calls(world, "r").calls.values() if c.kind == "model"]


def test_without_a_codec_the_inputs_are_on_disk(tmp_path: Path) -> None:
    """The scan finds a plain world's inputs in the log and the artifacts: the test below means something."""
    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(sealed_loop, 5, world=world, run_id="r"))
    leaks = _leaks(tmp_path)
    assert any(n.startswith("events.db") for n in leaks) and any(n.startswith("artifacts") for n in leaks)


def test_encrypted_inputs_leave_no_plaintext_and_read_back_with_the_key(tmp_path: Path) -> None:
    """Inline inputs, input artifacts and deltas are all ciphertext; with the key each reads whole."""
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        asyncio.run(durable.run_workflow(sealed_loop, 5, world=world, run_id="r"))
    assert _leaks(tmp_path) == []
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        inputs = _inputs(world)
        assert verify_run(world, "r")["problems"] == []
    assert len(inputs) == 5 and all(isinstance(i, dict) and MARK.decode() in i["messages"][0] for i in inputs)
    assert inputs[-1]["messages"][-1] == f"{MARK.decode()} turn 3"


def test_inputs_are_refused_without_the_key(tmp_path: Path) -> None:
    """Without its key (none, or another) the run's inputs are not shown: a typed error names the key."""
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        asyncio.run(durable.run_workflow(sealed_loop, 3, world=world, run_id="r"))
    with pytest.raises(durable.KeyMismatchError, match="key id"):
        durable.local_world(tmp_path)
    with (
        pytest.raises(durable.KeyMismatchError),
        durable.local_world(tmp_path, codec=EncryptionCodec(NEW)) as w,
    ):
        read_calls(w, "r")


def test_after_a_rekey_the_inputs_read_with_the_new_key_only(tmp_path: Path) -> None:
    """``rekey`` rewrites the input artifacts with the events: the new key reads them, nothing leaks."""
    with durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as world:
        asyncio.run(durable.run_workflow(sealed_loop, 5, world=world, run_id="r"))
        before = _inputs(world)
    rekey(tmp_path, EncryptionCodec(NEW), EncryptionCodec(KEY))
    assert _leaks(tmp_path) == []
    with durable.local_world(tmp_path, codec=EncryptionCodec(NEW)) as world:
        assert _inputs(world) == before
        assert verify_run(world, "r")["problems"] == []
    with (
        pytest.raises(durable.KeyMismatchError),
        durable.local_world(tmp_path, codec=EncryptionCodec(KEY)) as w,
    ):
        read_calls(w, "r")
