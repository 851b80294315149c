"""Small but real: scratch folders of tool child runs, gc units, broken pipes, --version, hints."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import ConfigurationError, SerializationError
from durable.cli import main
from durable.cli._history import parse_duration
from durable.cli._registry import CliError
from tests.conftest import Worlds


def test_scratch_dir_works_in_a_child_run_started_from_a_tool(tmp_path: Path) -> None:
    """The child's generated run id holds a '/': its scratch folder is still one folder of its own."""

    @durable.workflow
    async def fixer(task: str) -> str:
        async with durable.session("fixer"):
            folder = durable.scratch_dir()
            (folder / "patch.txt").write_text(task)
            return str(folder)

    @durable.tool(idempotent=True)
    async def start_fixer(task: str) -> str:
        return await fixer(task)

    @durable.workflow
    async def lead(task: str) -> str:
        return await start_fixer(task)

    with durable.local_world(tmp_path / "data") as world:
        folder = Path(asyncio.run(durable.run_workflow(lead, "fix it", world=world, run_id="r")))
        child = next(i.run_id for i in world.runs() if i.parent_run_id == "r")
    assert "/" in child
    runs = tmp_path / "data" / "runs"
    assert folder.parent.parent.parent == runs  # runs/<one folder>/harness/<session>
    assert folder.parent.parent.name == child.replace("/", "%2F")
    assert (folder / "patch.txt").read_text() == "fix it"


def test_scratch_folder_names_are_distinct_and_stay_inside() -> None:
    """Different run ids never share a folder, and none climbs out of runs/."""
    from durable.engine._sessions import folder_name

    ids = ["a/b", "a%2Fb", "a\\b", ".", "..", "%2E", "plain", "r:tool:x#0/wf:abc"]
    names = [folder_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert all("/" not in n and "\\" not in n and n not in (".", "..") for n in names)
    assert folder_name("plain") == "plain"  # ids without those characters keep their folder


@pytest.mark.parametrize("text", ["1", "30", "2.5"])
def test_gc_older_than_needs_a_unit(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare number is an error that says what to write; nothing is deleted."""
    with pytest.raises(CliError, match=rf"has no unit: write {text}s for seconds, or {text}m"):
        parse_duration(text)

    @durable.workflow
    async def w() -> int:
        return 1

    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(w, world=world, run_id="old"))
    assert main(["gc", "--older-than", text, "--data-dir", str(tmp_path)]) == 1
    assert f"write {text}s for seconds" in capsys.readouterr().err
    with durable.local_world(tmp_path) as world:
        assert [i.run_id for i in world.runs()] == ["old"]
    assert parse_duration(f"{text}s") == float(text)
    assert parse_duration("0") == 0.0


def test_little_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`little --version` prints the version and exits 0."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"little {durable.__version__}"


def test_events_into_a_closed_pipe_exit_quietly(tmp_path: Path) -> None:
    """`little events --json | head -1`: no BrokenPipeError traceback, status 141."""

    @durable.step
    async def s(i: int) -> str:
        return "x" * 100

    @durable.workflow
    async def many() -> int:
        for i in range(2000):  # more output than a pipe's buffer, even as plain lines
            async with durable.branch(str(i)):
                await s(i)
        return 2000

    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(many, world=world, run_id="r"))
    for args in (["events", "r", "--json"], ["events", "r"], ["events", "r", "--follow", "--json"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "durable.cli", *args, "--data-dir", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()  # like `head -1`: read a line, then go away
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait(timeout=60) == 141
        assert err == ""


def test_a_forgotten_await_says_an_await_is_missing(worlds: Worlds) -> None:
    """A step returning an un-awaited coroutine fails on its first run, saying `await` is missing."""

    async def fetch() -> int:
        return 1

    @durable.step
    async def forgot() -> Any:
        return fetch()  # missing await

    @durable.workflow
    async def w() -> Any:
        return await forgot()

    with pytest.raises(SerializationError, match="an `await` is probably missing") as err:
        asyncio.run(durable.run_workflow(w, world=worlds.open(), run_id="r"))
    assert err.value.path == "forgot"
    assert "coroutine" in str(err.value)


def test_a_reused_tool_call_id_gets_a_turn_and_id_hint(worlds: Worlds) -> None:
    """Two turns whose tool calls share an id: the refusal says to key by turn and id."""

    @durable.tool(idempotent=True)
    async def look(q: str) -> str:
        return q

    @durable.workflow
    async def agent() -> list[str]:
        out = []
        for turn in range(2):
            async with durable.branch("call_0"):  # providers number calls per turn
                out.append(await look(f"t{turn}"))
        return out

    with pytest.raises(ConfigurationError, match="key the branch by turn and id") as err:
        asyncio.run(durable.run_workflow(agent, world=worlds.open(), run_id="r"))
    assert 'durable.branch(f"{turn}:{call_id}")' in str(err.value)


def test_a_reused_ordinary_branch_key_gets_no_tool_call_hint(world: durable.World) -> None:
    """The hint is only given when the key looks like a model's tool-call id."""

    @durable.workflow
    async def w() -> None:
        for _ in range(2):
            async with durable.branch("user-42"):
                pass

    with pytest.raises(ConfigurationError, match="already used") as err:
        asyncio.run(durable.run_workflow(w, world=world, run_id="r"))
    assert "turn" not in str(err.value)
