"""`little` history and maintenance commands against a real data directory."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import durable
from durable.cli import main
from durable.cli._history import parse_duration
from durable.cli._registry import COMMANDS, CliError
from durable.cli._runs import follow_events
from durable.store import Append

calls: Counter[str] = Counter()


@durable.step
async def plan(goal: str) -> str:
    calls["plan"] += 1
    return f"plan for {goal}"


@durable.model_call(slot="worker")
async def think(text: str) -> str:
    calls["think"] += 1
    return f"{durable.model_for('worker')} thinks about {text}"


@durable.step
async def act(thought: str) -> str:
    calls["act"] += 1
    return thought.upper()


@durable.workflow
async def agent(goal: str) -> str:
    return await act(await think(await plan(goal)))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    calls.clear()
    with durable.local_world(tmp_path) as world:
        asyncio.run(durable.run_workflow(agent, "tea", world=world, run_id="r1", models={"worker": "m1"}))
    calls.clear()
    return tmp_path


def little(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_checkpoints_prints_a_table_and_json(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little checkpoints` lists plan and act with their seqs, as a table and as JSON."""
    code, out, _ = little(capsys, "checkpoints", "r1", "--data-dir", str(data_dir))
    assert code == 0
    assert out.splitlines()[0].split() == ["SEQ", "KIND", "PATH", "STATE_VERSION"]
    code, out, _ = little(capsys, "checkpoints", "r1", "--data-dir", str(data_dir), "--json")
    assert [(c["path"], c["state_version"]) for c in json.loads(out)] == [("plan", 1), ("act", 2)]


def test_restore_by_path_then_resume_runs_the_rest(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little restore r1 plan` makes the next resume call the model and act again, not plan."""
    code, out, _ = little(capsys, "restore", "r1", "plan", "--data-dir", str(data_dir), "--json")
    assert code == 0
    assert json.loads(out)["path"] == "plan"
    with durable.local_world(data_dir) as world:
        asyncio.run(durable.run_workflow(agent, "tea", world=world, run_id="r1", models={"worker": "m1"}))
    assert calls == Counter({"think": 1, "act": 1})


def test_restore_unknown_checkpoint_is_one_line(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown checkpoint exits 1 with one line that says to list checkpoints first."""
    code, out, err = little(capsys, "restore", "r1", "999", "--data-dir", str(data_dir))
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "little checkpoints r1" in err


def test_fork_with_another_model_reuses_the_plan(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little fork --model` makes a run that reuses plan and calls the new model for the rest."""
    code, out, _ = little(
        capsys,
        "fork",
        "r1",
        "plan",
        "--run-id",
        "f1",
        "--model",
        "worker=m2",
        "--data-dir",
        str(data_dir),
        "--json",
    )
    assert code == 0
    made = json.loads(out)
    assert (made["run_id"], made["fork_of"], made["models"]) == ("f1", "r1", {"worker": "m2"})
    with durable.local_world(data_dir) as world:
        out_ = asyncio.run(
            durable.run_workflow(agent, made["input"], world=world, run_id="f1", models=made["models"])
        )
    assert out_ == "M2 THINKS ABOUT PLAN FOR TEA"
    assert calls == Counter({"think": 1, "act": 1})


def test_fork_with_a_new_input(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little fork --input` records the new input in the fork's run.started."""
    code, out, _ = little(
        capsys, "fork", "r1", "act", "--input", '"coffee"', "--data-dir", str(data_dir), "--json"
    )
    assert code == 0
    assert json.loads(out)["input"] == "coffee"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fork", "r1", "plan", "--model", "no-equals-sign"], "SLOT=MODEL"),
        (["fork", "r1", "plan", "--input", "{not json"], "not valid JSON"),
        (["fork", "r1", "plan", "--run-id", "r1"], "already used"),
        (["fork", "ghost", "plan"], "no run 'ghost'"),
        (["fork", "r1", "nowhere"], "list its checkpoints first"),
        (["checkpoints", "ghost"], "no run 'ghost'"),
        (["restore", "ghost", "1"], "no run 'ghost'"),
        (["compact", "ghost"], "no run 'ghost'"),
        (["events", "ghost", "--follow"], "no run 'ghost'"),
        (["events", "r1", "--follow", "--interval", "0"], "--interval"),
        (["gc", "--older-than", "soon"], "duration"),
        (["gc"], "--older-than"),
        (["restore", "r1"], "Missing argument 'CHECKPOINT'"),
        (["fork"], "Missing argument 'RUN_ID'"),
        (["compact"], "pass one or more run ids"),
        (["compact", "r1", "--all"], "not both"),
        (["compact", "r1", "--status", "failed"], "pass it with --all"),
        (["verify"], "or --all for every run"),
        (["runs", "--limit", "many"], "not a valid integer"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_1(
    data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Every bad argument or unknown id prints one line on stderr and exits 1."""
    code, out, err = little(capsys, *argv, "--data-dir", str(data_dir))
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert message in err


def test_compact_then_events_shows_one_snapshot(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little compact --vacuum` leaves one snapshot event, and `little replay` still shows the state."""
    code, out, _ = little(capsys, "replay", "r1", "--data-dir", str(data_dir), "--json")
    before = json.loads(out)
    code, out, _ = little(capsys, "events", "r1", "--data-dir", str(data_dir), "--json")
    written = len(json.loads(out))
    code, out, _ = little(capsys, "compact", "r1", "--vacuum", "--data-dir", str(data_dir), "--json")
    assert code == 0
    assert json.loads(out)["events_replaced"] == written
    code, out, _ = little(capsys, "events", "r1", "--data-dir", str(data_dir), "--json")
    assert [e["type"] for e in json.loads(out)] == ["snapshot"]
    code, out, _ = little(capsys, "replay", "r1", "--data-dir", str(data_dir), "--json")
    assert json.loads(out) == before


def test_gc_deletes_finished_runs_past_the_age(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little gc --older-than 0s` deletes the finished run; a dry run before it deletes nothing."""
    code, out, _ = little(capsys, "gc", "--older-than", "0s", "--dry-run", "--data-dir", str(data_dir))
    assert (code, out.splitlines()) == (0, ["would delete 1 run(s)", "  r1"])
    code, out, _ = little(capsys, "gc", "--older-than", "1d", "--data-dir", str(data_dir), "--json")
    assert json.loads(out) == {"dry_run": False, "runs": []}
    code, out, _ = little(
        capsys, "gc", "--older-than", "0", "--vacuum", "--data-dir", str(data_dir), "--json"
    )
    assert json.loads(out)["runs"] == ["r1"]
    code, out, _ = little(capsys, "runs", "--data-dir", str(data_dir), "--json")
    assert json.loads(out) == []


def test_events_follow_of_a_finished_run_prints_all_and_stops(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little events --follow` of a finished run prints every event once and returns."""
    code, out, _ = little(capsys, "events", "r1", "--json", "--data-dir", str(data_dir))
    written = json.loads(out)
    code, out, _ = little(capsys, "events", "r1", "--follow", "--json", "--data-dir", str(data_dir))
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert events == written
    assert [e["seq"] for e in events] == list(range(1, len(written) + 1))
    assert events[-1]["type"] == "run.completed"


def test_follow_yields_events_written_while_it_waits(tmp_path: Path) -> None:
    """follow_events picks up rows another writer appends between polls and stops when the run ends."""
    with durable.local_world(tmp_path) as world:
        token = world.log.fence("live")
        started = '{"workflow":"w","input":null,"input_hash":"h"}'
        world.log.append([Append("live", [(1, "run.started", started)], token, created=("w", None))])
        later = [
            [(2, "step.started", '{"path":"a","input_hash":"x"}')],
            [(3, "step.completed", '{"path":"a","output":1,"output_hash":"o","state_version":1}')],
            [(4, "run.completed", '{"output":1,"output_hash":"o"}')],
        ]
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            rows = later.pop(0)
            status = "completed" if rows[0][1] == "run.completed" else None
            world.log.append([Append("live", rows, token, status=status)])

        seen = [e.type for e in follow_events(world, "live", interval=0.25, sleep=sleep, clock=lambda: 0.0)]
    assert seen == ["run.started", "step.started", "step.completed", "run.completed"]
    assert waits == [0.25, 0.25, 0.25]


def test_follow_stops_at_its_timeout(tmp_path: Path) -> None:
    """follow_events of a run that never ends stops once the clock passes the timeout."""
    with durable.local_world(tmp_path) as world:
        token = world.log.fence("live")
        started = '{"workflow":"w","input":null,"input_hash":"h"}'
        world.log.append([Append("live", [(1, "run.started", started)], token, created=("w", None))])
        now = [0.0]

        def sleep(seconds: float) -> None:
            now[0] += seconds

        seen = list(
            follow_events(world, "live", interval=1.0, timeout=3.0, sleep=sleep, clock=lambda: now[0])
        )
    assert [e.seq for e in seen] == [1]
    assert now[0] == 3.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("90s", 90), ("15m", 900), ("2h", 7200), ("1.5d", 129600)]
)
def test_parse_duration_reads_units(text: str, seconds: float) -> None:
    """Durations take s, m, h, d and w suffixes."""
    assert parse_duration(text) == seconds


def test_parse_duration_rejects_garbage() -> None:
    """A duration that is not a number with a unit raises CliError."""
    with pytest.raises(CliError):
        parse_duration("-5m")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`little COMMAND --help` prints a description with --data-dir and --json and exits 0."""
    code, out, _ = little(capsys, name, "--help")
    assert code == 0
    assert COMMANDS[name][0] in " ".join(out.split())
    assert "--data-dir" in out
    assert "--json" in out


def test_module_entry_point_knows_the_history_commands(data_dir: Path) -> None:
    """`python -m durable.cli checkpoints` works like `little checkpoints`."""
    proc = subprocess.run(
        [sys.executable, "-m", "durable.cli", "checkpoints", "r1", "--json", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert [c["path"] for c in json.loads(proc.stdout)] == ["plan", "act"]


@durable.workflow
async def other() -> int:
    return 0


def test_runs_filters_and_pages_newest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little runs` filters by status and workflow and pages through runs newest first."""
    with durable.local_world(tmp_path) as world:
        for rid in ("r1", "r2", "r3"):
            asyncio.run(durable.run_workflow(agent, "tea", world=world, run_id=rid, models={"worker": "m"}))
        asyncio.run(durable.run_workflow(other, world=world, run_id="r4"))
        durable.restore("r2", "plan", world=world)
    d = ["--data-dir", str(tmp_path), "--json"]

    def ids(*argv: str) -> list[str]:
        code, out, _ = little(capsys, "runs", *argv, *d)
        assert code == 0
        return [r["run_id"] for r in json.loads(out)]

    assert ids() == ["r4", "r3", "r2", "r1"]
    assert ids("--workflow", "agent") == ["r3", "r2", "r1"]
    assert ids("--status", "running") == ["r2"]
    assert ids("--status", "completed", "--workflow", "agent") == ["r3", "r1"]
    assert ids("--limit", "2") == ["r4", "r3"]
    assert ids("--limit", "2", "--offset", "2") == ["r2", "r1"]
