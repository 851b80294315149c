"""Each call's recorded input: inline, as an artifact, as a delta on the previous call, read back whole."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.engine import Recorded
from durable.engine._call_inputs import INPUT_INLINE_LIMIT
from durable.ops import read_calls
from durable.ops._call_inputs import InputReader, input_artifacts, input_problems, read_inputs
from durable.ops._verify import verify_run
from durable.worlds import export_run, replay_file
from tests.conftest import Worlds

ROOT = Path(__file__).resolve().parents[2]


@durable.step
async def greet(name: str, times: int = 1) -> str:
    return f"hello {name} " * times


@durable.model_call(slot="worker", name="chat")
async def chat(messages: list[dict[str, str]], temperature: float = 0.5) -> dict[str, str]:
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return {"role": "assistant", "content": f"turn {turn}: {'x' * 40}"}


@durable.workflow(name="chat-loop")
async def chat_loop(turns: int) -> int:
    messages = [{"role": "user", "content": "keep talking"}]
    async with durable.session("worker"):
        for _ in range(turns):
            messages.append(await chat(messages))
            messages.append({"role": "user", "content": "and then?"})
    return len(messages)


def _history(turns: int) -> list[dict[str, str]]:
    """The messages the model call of turn ``turns`` reads (what ``chat_loop`` passes)."""
    out = [{"role": "user", "content": "keep talking"}]
    for t in range(turns):
        out += [
            {"role": "assistant", "content": f"turn {t}: {'x' * 40}"},
            {"role": "user", "content": "and then?"},
        ]
    return out


def _chat_calls(world: durable.World, run_id: str) -> list[Any]:
    return [c for p, c in read_calls(world, run_id).calls.items() if c.kind == "model"]


def test_a_short_input_is_recorded_inline_and_read_back(world: durable.World) -> None:
    """A step's arguments, defaults included, are in its event and in the calls read back."""

    @durable.workflow
    async def hello() -> str:
        return await greet("ada")

    asyncio.run(durable.run_workflow(hello, world=world, run_id="r"))
    call = read_calls(world, "r").calls["greet"]
    assert (call.input_state, call.input, call.input_note) == (
        "recorded",
        {"name": "ada", "times": 1},
        "inline",
    )
    texts = [d for _, t, d in world.log.read("r") if t.startswith("step.")]
    assert any('"input":{"name":"ada","times":1}' in d for d in texts)


def test_an_agent_loop_records_each_turn_as_a_delta_and_reads_every_input_whole(world: durable.World) -> None:
    """Past the inline limit the first call is an artifact and each later one only its new messages."""
    asyncio.run(durable.run_workflow(chat_loop, 40, world=world, run_id="r"))
    calls = _chat_calls(world, "r")
    assert [c.input for c in calls] == [{"messages": _history(t), "temperature": 0.5} for t in range(40)]
    notes = [c.input_note for c in calls]
    inline = notes.count("inline")
    assert 0 < inline < 40 and notes == ["inline"] * inline + ["artifact"] + ["delta"] * (39 - inline)
    intents = [json.loads(d) for _, t, d in world.log.read("r") if t == "effect.intent"]
    deltas = [i["input_ref"] for i in intents if "base" in i.get("input_ref", {})]
    assert all(len(d["append"]["messages"]) == 2 and d["args"] == {"temperature": 0.5} for d in deltas)
    assert all(len(json.dumps(i.get("input", {}))) <= INPUT_INLINE_LIMIT + 40 for i in intents)


def test_a_list_changed_in_place_is_recorded_whole_not_as_a_delta(world: durable.World) -> None:
    """An earlier message edited between two calls is not mistaken for the same history."""

    @durable.workflow
    async def edits() -> None:
        messages = [{"role": "user", "content": "y" * 1200}]
        async with durable.session("worker"):
            await chat(messages)
            messages[0]["content"] = "z" * 1200  # the same list and dict, another value
            messages.append({"role": "user", "content": "more"})
            await chat(messages)

    asyncio.run(durable.run_workflow(edits, world=world, run_id="r"))
    first, second = _chat_calls(world, "r")
    assert (first.input_note, second.input_note) == ("artifact", "artifact")
    assert second.input["messages"][0]["content"] == "z" * 1200


def test_every_recorded_input_matches_its_hash_in_verify(world: durable.World) -> None:
    """``little verify`` rebuilds every input, delta chains included, and finds each hash right."""
    asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r"))
    report = verify_run(world, "r")
    assert report["problems"] == []
    assert report["artifacts"] >= 1


def test_verify_names_an_input_whose_artifact_is_gone(tmp_path: Path) -> None:
    """A deleted input artifact is a problem of verify, and the tree says the input is unreadable."""
    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r"))
        shas = input_artifacts(durable.recover("r", world=world), "r", world.log.read("r"))
    for sha in shas:
        digest = sha.removeprefix("sha256:")
        (tmp_path / "artifacts" / digest[:2] / digest).unlink()
    with durable.local_world(tmp_path) as world:
        problems = verify_run(world, "r")["problems"]
        calls = _chat_calls(world, "r")
    assert any("cannot be read back" in p for p in problems)
    assert {c.input_state for c in calls} == {"recorded", "unreadable"}
    assert any("missing from the artifact store" in (c.input_note or "") for c in calls)


def test_a_resumed_loop_starts_a_new_chain_and_reads_every_input_whole(worlds: Worlds) -> None:
    """After a crash the first large call of the new drive is stored whole; every input reads back."""
    from tests.helpers.crash import SimulatedCrash, on

    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(chat_loop, 30, world=worlds.crashing(on("effect.intent", "#20")), run_id="r")
        )
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r")) == 61
    calls = _chat_calls(world, "r")
    assert [c.input for c in calls] == [{"messages": _history(t), "temperature": 0.5} for t in range(30)]
    assert [c.input_note for c in calls].count("artifact") == 2  # one per drive


def test_a_loop_sigkilled_mid_turn_resumes_in_a_new_process_with_every_input(tmp_path: Path) -> None:
    """Killed inside a model call, resumed by another process: the inputs of both drives read whole."""

    def spawn(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "tests.helpers.procs.chat_loop", str(tmp_path), "r", "40", *extra]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)

    killed = spawn("25")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = spawn()
    assert resumed.returncode == 0 and resumed.stdout.strip() == "81", resumed.stderr
    with durable.local_world(tmp_path) as world:
        calls = _chat_calls(world, "r")
        assert verify_run(world, "r")["problems"] == []
    assert len(calls) == 40 and {c.input_state for c in calls} == {"recorded"}
    assert calls[-1].input["messages"][-1] == {"role": "tool", "content": f"item {38 * 7 % 101} is in stock"}


def test_gc_keeps_input_artifacts_while_the_run_is_kept_and_drops_them_with_it(tmp_path: Path) -> None:
    """The artifacts an input lives in count as the run's: kept by gc, deleted with the run."""
    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r"))
        shas = input_artifacts(durable.recover("r", world=world), "r", world.log.read("r"))
        assert shas
        durable.gc(world=world, older_than=3600)
        assert all(world.artifacts.get(s) is not None for s in shas)
        durable.gc(world=world, older_than=0)
        assert all(world.artifacts.get(s) is None for s in shas)


def test_compaction_keeps_every_input_readable(world: durable.World) -> None:
    """After compacting the run, each call's input reads back as before."""
    asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r"))
    before = [(c.path, c.input) for c in _chat_calls(world, "r")]
    durable.compact("r", world=world)
    assert [(c.path, c.input) for c in _chat_calls(world, "r")] == before
    assert verify_run(world, "r")["problems"] == []


@durable.model_call(slot="worker", name="flaky_chat")
async def flaky_chat(messages: list[dict[str, str]]) -> str:
    if len(messages) == 3:
        raise ValueError("the model was busy")
    return f"reply {len(messages)} " + "w" * 300


@durable.step(max_visits=10)
async def tick(n: int) -> int:
    return n


@durable.workflow(name="flaky-loop")
async def flaky_loop() -> int:
    messages = [{"role": "user", "content": "q" * 1100}]
    async with durable.session("worker"):
        for _ in range(5):
            try:
                messages.append({"role": "assistant", "content": await flaky_chat(messages)})
            except ValueError:
                messages.append({"role": "assistant", "content": "(busy)"})
            messages.append({"role": "user", "content": "again"})
            await tick(len(messages))
    return len(messages)


def test_a_fork_keeps_the_inputs_of_its_inherited_calls_even_past_a_failed_base(world: durable.World) -> None:
    """A fork drops the failed call a delta chain runs through; the inherited inputs still read whole."""
    asyncio.run(durable.run_workflow(flaky_loop, world=world, run_id="p"))
    parent = {c.path: c.input for c in _chat_calls(world, "p")}
    notes = [c.input_note for c in _chat_calls(world, "p")]
    assert notes[0] == "artifact" and set(notes[1:]) == {"delta"}
    at = durable.checkpoints("p", world=world)[3]  # after the fourth turn
    fork = durable.fork("p", at.seq, world=world, new_run_id="f")
    inherited = {c.path: c.input for c in _chat_calls(world, "f")}
    assert inherited and all(inherited[p] == parent[p] for p in inherited)
    assert len(inherited) < len(parent)  # the failed call stayed behind
    assert asyncio.run(durable.run_workflow(flaky_loop, world=world, run_id=fork.run_id)) == 11
    assert {c.input_state for c in _chat_calls(world, "f")} == {"recorded"}
    assert verify_run(world, "f")["problems"] == []


def test_an_exported_run_carries_its_inputs_and_replays_from_the_file(tmp_path: Path) -> None:
    """``little export`` keeps each call's input in its rows; ``replay_file`` replays them."""
    with durable.local_world(tmp_path / "data") as world:
        asyncio.run(durable.run_workflow(chat_loop, 3, world=world, run_id="r"))
        doc = export_run(world, "r")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    intents = [p for _, t, p in doc["rows"] if t == "effect.intent"]
    assert [len(i["input"]["messages"]) for i in intents] == [1, 3, 5]
    assert replay_file(path, chat_loop).ok


@pytest.mark.parametrize("case", ["clean", "models", "child_workflow", "signature"])
def test_inputs_of_a_log_written_before_format_8_read_as_not_recorded(worlds: Worlds, case: str) -> None:
    """A recorded older log's calls say their input was not recorded, and keep their hash."""
    from tests.helpers.recorded import load

    world = load(worlds, case)
    calls = [c for run in world.log.runs() for c in read_calls(world, run.run_id).calls.values()]
    hashed = [c for c in calls if c.input_hash is not None]
    assert hashed and all(c.input_state == "not recorded" and c.input is None for c in hashed)


def test_reading_inputs_reads_each_artifact_once(world: durable.World) -> None:
    """One reader fetches a shared artifact a single time, however many deltas chain on it."""
    asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r"))
    seen: list[str] = []
    get = world.artifacts.get

    def counted(sha: str) -> bytes | None:
        seen.append(sha)
        return get(sha)

    world.artifacts.get = counted  # type: ignore[method-assign]
    reader = read_inputs(world, "r", world.log.read("r"))
    assert len(seen) == len(set(seen)) == 1
    assert sum(1 for v in reader.inputs.values() if v.stored == "delta") > 10


def test_inputs_read_from_the_end_of_a_log_say_which_deltas_reach_before_it(world: durable.World) -> None:
    """The last rows of a log (a long run's page): a delta chain that reaches before them says so."""
    asyncio.run(durable.run_workflow(chat_loop, 30, world=world, run_id="r"))
    rows = world.log.read("r")
    intents = [(seq, json.loads(d)) for seq, t, d in rows if t == "effect.intent"]
    cut = next(seq for seq, d in intents if "base" in d.get("input_ref", {}))  # the first delta's row
    reader = read_inputs(world, "r", world.log.read("r", cut - 1))
    after = [reader.get("model", d["key"]) for seq, d in intents if seq >= cut]
    assert after and {(a.state, a.stored) for a in after} == {("earlier", "delta")}
    assert f"was recorded before seq {cut}, where the rows read begin" in (after[0].problem or "")
    whole = read_inputs(world, "r", rows)
    assert all(whole.get("model", d["key"]).state == "recorded" for _, d in intents)
    assert not any(whole.get("model", d["key"]).state == "earlier" for _, d in intents)


def test_an_input_edited_in_the_log_is_named_by_verify(tmp_path: Path) -> None:
    """An inline input changed behind the SDK's back no longer matches its hash, and verify says where."""

    @durable.workflow
    async def hello() -> str:
        return await greet("ada")

    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(hello, world=world, run_id="r"))
    with sqlite3.connect(tmp_path / "events.db") as db:
        db.execute(
            """UPDATE events SET data = replace(data, '"name":"ada"', '"name":"eve"') WHERE run_id = 'r'"""
        )
    with durable.local_world(tmp_path) as world:
        problems = verify_run(world, "r")["problems"]
        assert read_calls(world, "r").calls["greet"].input == {"name": "eve", "times": 1}
    assert any("the input of greet (inline) does not match its input_hash" in p for p in problems)


def test_a_crafted_delta_chain_that_loops_or_is_malformed_reads_as_unreadable(world: durable.World) -> None:
    """A delta naming itself as its base, or a malformed one, is unreadable with the reason; nothing loops."""
    rec = Recorded()
    rec.intents["model:a#0"] = {
        "key": "model:a#0",
        "input_hash": "h",
        "input_ref": {"base": "model:a#0", "append": {}},
    }
    rec.intents["model:b#1"] = {"key": "model:b#1", "input_hash": "h", "input_ref": {"base": "model:a#0"}}
    rec.intents["model:c#2"] = {"key": "model:c#2", "input_hash": "h", "input_ref": {"artifact": "not a ref"}}
    reader = InputReader(world, "r")
    reader.read_state(rec)
    got = {key: reader.get("model", key) for key in rec.intents}
    assert {g.state for g in got.values()} == {"unreadable"}
    assert "loops" in (got["model:a#0"].problem or "") and "loops" in (got["model:b#1"].problem or "")
    assert "names no artifact" in (got["model:c#2"].problem or "")
    assert input_problems(reader) and all("cannot be read back" in p for p in input_problems(reader))


def test_a_restored_run_reads_every_input_after_it_runs_again_and_is_compacted(world: durable.World) -> None:
    """Restored to a checkpoint and run again, then compacted: each call's input still reads whole."""
    asyncio.run(durable.run_workflow(flaky_loop, world=world, run_id="r"))
    durable.restore("r", durable.checkpoints("r", world=world)[1].seq, world=world)
    assert asyncio.run(durable.run_workflow(flaky_loop, world=world, run_id="r")) == 11
    before = [(c.path, c.input) for c in _chat_calls(world, "r")]
    assert len(before) == 5 and {c.input_state for c in _chat_calls(world, "r")} == {"recorded"}
    durable.compact("r", world=world)
    assert [(c.path, c.input) for c in _chat_calls(world, "r")] == before
    assert verify_run(world, "r")["problems"] == []
