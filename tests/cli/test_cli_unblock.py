"""`little resume`, `answer`, `resolve` and `doctor` on a real data directory, in this process."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.cli import main
from tests.helpers.procs import run_here
from tests.helpers.procs import unhappy_app as app

FLAKY = "tests.helpers.procs.unhappy_app:flaky"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory with a run of ``flaky`` that failed (no queue, no worker)."""
    monkeypatch.setenv("DURABLE_TEST_DIR", str(tmp_path))
    with durable.local_world(tmp_path / "data") as world, contextlib.suppress(ValueError):
        asyncio.run(durable.run_workflow(app.flaky, 3, world=world, run_id="f"))
    return tmp_path / "data"


def test_resume_of_a_failed_run_without_a_queue_says_what_will_drive_it(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --workflow, `little resume` says that nothing drives it here and what would."""
    assert main(["resume", "f", "--data-dir", str(data_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "running"
    assert "nothing drives it in this process" in out["note"] and "--workflow" in out["note"]


def test_resume_with_the_workflow_drives_the_run_to_its_outcome_in_the_foreground(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --workflow, `little resume` drives the run here and prints its outcome (even if asked before)."""
    assert main(["resume", "f", "--data-dir", str(data_dir), "--json"]) == 0
    capsys.readouterr()
    (data_dir.parent / "fixed").touch()
    assert main(["resume", "f", "--workflow", FLAKY, "--data-dir", str(data_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"


def test_resume_of_a_run_that_failed_again_prints_the_fix(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A foreground resume that fails again says so, with the command to try once more."""
    assert main(["resume", "f", "--workflow", FLAKY, "--data-dir", str(data_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "failed"
    assert out["fixes"] == [f"little resume f --workflow {FLAKY} --data-dir {data_dir}"]


@pytest.mark.parametrize(
    "args",
    [
        ["resolve", "f", "tool:x#0"],
        ["resolve", "f", "tool:x#0", "--happened", "--not-happened"],
        ["resolve", "f", "tool:x#0", "--not-happened", "--result", "1"],
        ["resume", "f", "some.key"],
        ["resume", "f", "--accept-drift"],
    ],
)
def test_contradictory_arguments_are_usage_errors(
    data_dir: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`little resolve` needs exactly one of --happened and --not-happened; drift keys need --accept-drift."""
    assert main([*args, "--data-dir", str(data_dir)]) != 0
    assert capsys.readouterr().err.strip()


def test_answer_of_a_run_that_waits_for_nothing_fails_with_one_line(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little answer` on a failed run exits 1 and says the run waits for no answer."""
    assert main(["answer", "f", "1", "--data-dir", str(data_dir)]) == 1
    assert "waits for no answer" in capsys.readouterr().err


def test_answer_that_is_not_json_is_refused(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little answer RUN yes` says the answer must be JSON and how to quote a string."""
    assert main(["answer", "f", "yes", "--data-dir", str(data_dir)]) == 1
    assert "must be JSON" in capsys.readouterr().err


def test_doctor_on_a_healthy_directory_exits_0(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A failed run is final, not stuck: `little doctor` lists nothing and exits 0."""
    assert main(["doctor", "--data-dir", str(data_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


HERE = "tests.helpers.procs.run_here"


def _cut_call(data_dir: Path, wf: Any, value: Any, run_id: str) -> str:
    """A run whose plain tool was cut mid-call, blocked (unknown_commit) by the next drive; its key."""
    run_here.CUT["armed"] = True
    try:
        with durable.local_world(data_dir) as world, contextlib.suppress(KeyboardInterrupt):
            asyncio.run(durable.run_workflow(wf, value, world=world, run_id=run_id))
    finally:
        run_here.CUT["armed"] = False
    with durable.local_world(data_dir) as world:
        with pytest.raises(durable.UnknownCommitError):
            asyncio.run(durable.run_workflow(wf, value, world=world, run_id=run_id))
        st = durable.runtime.run_status(world, run_id)
        assert (st.status, st.reason) == ("blocked", "unknown_commit") and st.error is not None
        return str(st.error["key"])


def test_resolve_happened_without_a_result_of_a_tool_that_returns_a_value_asks_for_result(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--happened` without `--result` for a tool returning str says --result JSON is needed, and works."""
    key = _cut_call(data_dir, run_here.paying, 5, "p")
    where = ["--workflow", f"{HERE}:paying", "--data-dir", str(data_dir)]
    assert main(["resolve", "p", key, "--happened", *where]) == 1
    err = capsys.readouterr().err
    assert "returns str" in err and "--result JSON" in err and "Nothing was written" in err
    assert "None" not in err
    assert main(["resolve", "p", key, "--happened", "--result", '"charged 5"', *where, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"


def test_resolve_happened_without_a_result_of_a_tool_that_returns_none_records_none(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """For a tool returning None, `--happened` alone records None as its result and says so."""
    key = _cut_call(data_dir, run_here.notifying, "ada", "n")
    where = ["--workflow", f"{HERE}:notifying", "--data-dir", str(data_dir)]
    assert main(["resolve", "n", key, "--happened", *where, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "completed"
    assert out["result"].startswith("None (no --result was given")
    with durable.local_world(data_dir) as world:
        assert asyncio.run(durable.handle("n", world=world).result()) == "told ada"


def test_resolve_with_another_workflow_says_which_workflow_the_run_needs(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--workflow` naming another workflow is named as the mistake, with the run's own workflow."""
    key = _cut_call(data_dir, run_here.paying, 5, "p")
    assert main(["resolve", "p", key, "--happened", "--result", '"x"', "--workflow", f"{HERE}:notifying",
                 "--data-dir", str(data_dir)]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "is a run of workflow 'paying', but the workflow given is 'notifying'" in err
    assert "Nothing was written" in err


def test_resume_of_a_run_that_waits_for_an_answer_says_to_answer_it_and_exits_1(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little resume --accept-drift` of an interrupted run records nothing, exits 1, says `little answer`."""
    with durable.local_world(data_dir) as world, pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(app.drift, 1, world=world, run_id="i"))
    before = _events(data_dir, "i")
    assert main(["resume", "i", "--accept-drift", "workflow.version", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert "waits for an answer at 'interrupt#0'" in out and "nothing was recorded" in out
    assert "little answer i JSON" in out and "nothing to resume" in out
    assert _events(data_dir, "i") == before
    assert main(["answer", "i", "2", "--workflow", "tests.helpers.procs.unhappy_app:drift",
                 "--data-dir", str(data_dir), "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["status"] == "completed"


def _events(data_dir: Path, run_id: str) -> int:
    with durable.local_world(data_dir) as world:
        return len(world.events(run_id))
