"""``little diff``: two runs aligned by call path, on every backend, encrypted, killed mid-call, recorded."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durable
from durable.cli import main
from durable.cli._diff import diff_runs
from durable.store import Append
from tests.helpers import pg
from tests.helpers.recorded import DATA

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"writer": "small"}


@durable.model_call(slot="writer")
async def write(notes: str) -> str:
    return f"[{durable.model_for('writer')}] reply from {notes}"


@durable.step
async def gather(topic: str) -> str:
    return f"notes on {topic}"


@durable.step
async def reply(notes: str) -> str:
    return await write(notes)


@durable.workflow
async def agent(topic: str) -> str:
    return await reply(await gather(topic))


def _fork_pair(world: durable.World) -> None:
    asyncio.run(durable.run_workflow(agent, "owls", world=world, run_id="small", models=SMALL))
    fork = durable.fork("small", "gather", world=world, new_run_id="big", models={"writer": "big"})
    asyncio.run(durable.run_workflow(agent, fork.input, world=world, run_id="big", models=fork.models))


EXPECTED = [
    ("gather", "same"),
    ("reply", "changed"),
    ("reply.model:write#0", "changed"),
]


def test_a_fork_and_its_parent_differ_where_the_new_model_answered(world: durable.World) -> None:
    """On every backend, the inherited step is the same and the calls after the checkpoint changed."""
    _fork_pair(world)
    rows = diff_runs(world, "small", "big")
    assert [(r["path"], r["status"]) for r in rows] == EXPECTED
    changed = rows[2]
    assert changed["a"]["output"] == "[small] reply from notes on owls"
    assert changed["b"]["output"] == "[big] reply from notes on owls"


def test_json_prints_path_status_a_and_b(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` prints a list of ``{"path", "status", "a", "b"}``, the calls as data on each side."""
    with durable.local_world(tmp_path) as world:
        _fork_pair(world)
    assert main(["diff", "small", "big", "--data-dir", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(set(r) == {"path", "status", "a", "b"} for r in rows)
    assert [(r["path"], r["status"]) for r in rows] == EXPECTED
    assert rows[0]["a"]["kind"] == "step" and rows[2]["b"]["kind"] == "model"


def test_the_table_shows_both_outputs_and_changed_keeps_only_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """People get a table with both outputs and the counts; ``--changed`` leaves out the same paths."""
    with durable.local_world(tmp_path) as world:
        _fork_pair(world)
    assert main(["diff", "small", "big", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert '"[small] reply from notes on owls"' in out and '"[big] reply from notes on owls"' in out
    assert out.rstrip().endswith("1 same, 2 changed, 0 only_a, 0 only_b")
    assert main(["diff", "small", "big", "--data-dir", str(tmp_path), "--changed", "--json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)] == ["reply", "reply.model:write#0"]


def test_an_unknown_run_is_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run id the directory does not have exits 1 with one line naming it and how to list runs."""
    with durable.local_world(tmp_path) as world:
        _fork_pair(world)
    assert main(["diff", "small", "nope", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err and "little runs" in err


def test_an_encrypted_directory_shows_values_only_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without LITTLE_KEY the values stay sealed (exit 1, the key id named); with it they are shown."""
    pytest.importorskip("cryptography")
    key = bytes(range(32))
    with durable.local_world(tmp_path, codec=durable.EncryptionCodec(key)) as world:
        _fork_pair(world)
    monkeypatch.delenv("LITTLE_KEY", raising=False)
    monkeypatch.delenv("LITTLE_KEY_FILE", raising=False)
    assert main(["diff", "small", "big", "--data-dir", str(tmp_path), "--json"]) == 1
    out = capsys.readouterr()
    assert out.out == "" and "encrypted" in out.err and "LITTLE_KEY" in out.err
    assert "reply from" not in out.err
    monkeypatch.setenv("LITTLE_KEY", key.hex())
    assert main(["diff", "small", "big", "--data-dir", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[2]["b"]["output"] == "[big] reply from notes on owls"


def test_diff_reads_a_postgres_world(pg_server: pg.Server, capsys: pytest.CaptureFixture[str]) -> None:
    """``little diff --dsn`` aligns two runs of a Postgres world."""
    schema = pg.new_schema()
    try:
        with durable.postgres_world(pg_server.dsn, schema=schema) as world:
            _fork_pair(world)
        assert main(["diff", "small", "big", "--dsn", pg_server.dsn, "--schema", schema, "--json"]) == 0
        assert [(r["path"], r["status"]) for r in json.loads(capsys.readouterr().out)] == EXPECTED
    finally:
        pg.drop_schema(pg_server.dsn, schema)


KILLED = """
import asyncio, os, signal, sys
import durable

@durable.tool
async def charge(n: int) -> str:
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"charged {n}"

@durable.step
async def settle(n: int) -> str:
    return await charge(n)

@durable.step
async def notify(text: str) -> str:
    return "sent: " + text

@durable.workflow
async def pay(n: int) -> str:
    return await notify(await settle(n))

async def main():
    with durable.local_world(sys.argv[1]) as w:
        await durable.run_workflow(pay, 5, world=w, run_id=sys.argv[2])

asyncio.run(main())
"""


def test_a_run_killed_inside_a_tool_shows_its_call_unconfirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run SIGKILLed between a tool's intent and receipt diffs as unconfirmed there, and lacks the rest."""
    script = tmp_path / "pay.py"
    script.write_text(KILLED)
    data = tmp_path / "data"
    for mode, status in (("kill", -signal.SIGKILL), ("done", 0)):
        proc = subprocess.run([sys.executable, str(script), str(data), mode], cwd=ROOT, timeout=60)
        assert proc.returncode == status
    assert main(["diff", "kill", "done", "--data-dir", str(data), "--json"]) == 0
    rows = {r["path"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["settle.tool:charge#0"]["status"] == "changed"
    assert rows["settle.tool:charge#0"]["a"]["outcome"] == "unconfirmed"
    assert rows["settle"]["a"]["outcome"] == "running"
    assert rows["notify"]["status"] == "only_b"


def _load_as(world: durable.World, case: str, run_id: str) -> None:
    rows = [json.loads(line) for line in (DATA / case / "events.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["run_id"] == "run_recorded"]
    stored = [(int(r["seq"]), str(r["type"]), json.dumps(r["data"])) for r in rows]
    token = world.log.fence(run_id)
    world.log.append(
        [Append(run_id, stored, token, str(rows[0]["status"]), (str(rows[0]["workflow"]), None))]
    )


def test_runs_recorded_by_older_code_are_aligned(world: durable.World) -> None:
    """Two recorded logs of an earlier format (another model mapping) align path by path."""
    _load_as(world, "clean", "recorded-a")
    _load_as(world, "models", "recorded-b")
    rows = diff_runs(world, "recorded-a", "recorded-b")
    assert rows and {r["status"] for r in rows} <= {"same", "changed", "only_a", "only_b"}
    same_run = diff_runs(world, "recorded-a", "recorded-a")
    assert [r["path"] for r in same_run] == [r["path"] for r in rows if r["a"] is not None]
    assert {r["status"] for r in same_run} == {"same"}
    both = [r["b"]["input_change"] for r in rows if r["a"] and r["b"] and r["a"]["input_hash"]]
    assert both and {c["status"] for c in both} <= {"same", "not recorded"}  # older logs keep hashes only


def _fork_with_another_topic(world: durable.World) -> None:
    asyncio.run(durable.run_workflow(agent, "owls", world=world, run_id="small", models=SMALL))
    fork = durable.fork("small", "gather", world=world, new_run_id="cats", input="cats")
    asyncio.run(durable.run_workflow(agent, fork.input, world=world, run_id="cats", models=fork.models))


def test_json_says_how_each_input_differs_on_every_backend(world: durable.World) -> None:
    """A fork with another input: each path's side B says whether its input changed and which argument."""
    _fork_with_another_topic(world)
    change = {r["path"]: r["b"]["input_change"] for r in diff_runs(world, "small", "cats")}
    assert change["gather"] == {"status": "changed", "changes": ['topic: "owls" in A, "cats" in B']}
    assert change["reply"]["status"] == "changed" and change["reply"]["changes"][0].startswith("notes: ")


def test_the_table_lists_the_inputs_that_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under the table, ``little diff`` names each path whose input differs and how."""
    with durable.local_world(tmp_path) as world:
        _fork_with_another_topic(world)
    assert main(["diff", "small", "cats", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "inputs that differ:" in out and '  gather: topic: "owls" in A, "cats" in B' in out


def test_a_run_written_by_a_newer_sdk_is_one_line_saying_to_upgrade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log of a newer format is refused in one line that says to upgrade; nothing is printed on stdout."""
    with durable.local_world(tmp_path) as world:
        _fork_pair(world)
        _load_as(world, "newer_format", "future")
    assert main(["diff", "small", "future", "--data-dir", str(tmp_path), "--json"]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and "Upgrade little-workflow" in out.err
