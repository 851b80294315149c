"""``little verify``: integrity, artifact hashes and drift of a run in a data directory."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import durable
from durable import SqliteLog
from durable.cli import main
from tests.conftest import Worlds
from tests.helpers.codegen import load_source
from tests.helpers.recorded import RUN_ID, load


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh data directory (SQLite) for recorded cases."""
    return tmp_path / "data"


def _load(tmp_path: Path, case: str) -> Path:
    worlds = Worlds("sqlite", tmp_path)
    load(worlds, case)
    worlds.close()
    return worlds.data_dir


def _verify(data_dir: Path, *args: str) -> int:
    return main(["verify", RUN_ID, "--data-dir", str(data_dir), *args])


def test_clean_run_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sound log with intact artifacts and unchanged code exits 0."""
    data = _load(tmp_path, "clean")
    assert _verify(data, "--workflow", "tests.drift_app:review", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["problems"] == []
    assert report["changes"] == []
    assert report["undescribed"] == []
    assert report["artifacts"] == 2
    assert len(report["runs"]) == 3


def test_drift_is_reported_with_the_change_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With ``--workflow`` a drifted run exits 1 and prints the same ``key: old → new`` lines."""
    data = _load(tmp_path, "signature")
    assert _verify(data, "--workflow", "tests.drift_app:review") == 1
    out = capsys.readouterr().out
    assert (
        '- tools.score.signature: "(candidate_id: str) -> int" → '
        '"(candidate_id: str, strict: bool = False) -> int"'
    ) in out
    assert "To start fresh, run with a new run_id." in out


def test_drift_is_not_checked_without_the_workflow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--workflow`` only the log and artifacts are checked, and the report says so."""
    data = _load(tmp_path, "signature")
    assert _verify(data) == 0
    assert "drift not checked" in capsys.readouterr().out


def test_model_mapping_can_be_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--model SLOT=ID`` compares another mapping, for the run and each child run it would call again."""
    data = _load(tmp_path, "clean")
    assert (
        _verify(data, "--workflow", "tests.drift_app:review", "--model", "worker=gpt-4o-mini", "--json") == 1
    )
    report = json.loads(capsys.readouterr().out)
    assert report["changes"] == [{"key": "models.worker", "old": "gpt-5", "new": "gpt-4o-mini"}]
    # The child runs completed and the parent holds their receipts: they never run again.
    assert report["completed"] == [f"{RUN_ID}:workflow:scoring#0", f"{RUN_ID}:workflow:scoring#1"]


@pytest.mark.parametrize("case", ["tampered_artifact", "missing_artifact"])
def test_damaged_artifact_fails_verification(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A changed or missing artifact payload exits 1 and is named in the problems."""
    data = _load(tmp_path, case)
    assert _verify(data, "--json") == 1
    [problem] = json.loads(capsys.readouterr().out)["problems"]
    assert ("report.md" if case == "tampered_artifact" else "'table'") in problem


def test_seq_gap_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A row missing from the middle of the log is reported as a seq gap."""
    data = _load(tmp_path, "clean")
    with sqlite3.connect(data / "events.db") as db:
        db.execute("DELETE FROM events WHERE run_id = ? AND seq = 5", (RUN_ID,))
    db.close()
    assert _verify(data, "--json") == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems == [f"run {RUN_ID!r}: seq gap: expected event 5, found 6"]


def test_event_that_breaks_its_schema_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An event whose data no longer matches its schema is reported with its seq."""
    data = _load(tmp_path, "clean")
    with sqlite3.connect(data / "events.db") as db:
        db.execute("UPDATE events SET data = ? WHERE run_id = ? AND seq = 2", ('{"visit": "x"}', RUN_ID))
    db.close()
    assert _verify(data, "--json") == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert any(p.startswith(f"run {RUN_ID!r}: event 2 (step.started) does not match") for p in problems)


def test_newer_format_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run written by a newer log format is reported with that format's number."""
    data = _load(tmp_path, "newer_format")
    assert _verify(data, "--json") == 1
    assert any("log format 99" in p for p in json.loads(capsys.readouterr().out)["problems"])


def test_unknown_run_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown run id prints one line to stderr and exits 1."""
    data = _load(tmp_path, "clean")
    assert main(["verify", "nope", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no run 'nope'" in err


@pytest.mark.parametrize(
    "target", ["tests.drift_app", "tests.drift_app:nothing", "no_such_module:x", "tests.drift_app:score"]
)
def test_bad_workflow_target_is_one_line_and_exit_1(
    tmp_path: Path, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--workflow`` that is malformed, missing or not a workflow is a one-line error."""
    data = _load(tmp_path, "clean")
    assert _verify(data, "--workflow", target) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_verify_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``little verify --help`` documents its options."""
    assert main(["verify", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--workflow" in out
    assert "--model" in out


def test_failed_database_integrity_check_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever SQLite's integrity check reports other than ``ok`` fails the verification."""
    data = _load(tmp_path, "clean")
    monkeypatch.setattr(SqliteLog, "integrity_check", lambda self: "Page 7: btree damaged")
    assert _verify(data, "--json") == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems == ["database integrity check failed: Page 7: btree damaged"]


def test_real_integrity_check_of_a_sound_file_is_ok(tmp_path: Path) -> None:
    """SQLite's own integrity check answers ``ok`` for a log durable wrote."""
    data = _load(tmp_path, "clean")
    log = SqliteLog(data / "events.db")
    try:
        assert log.integrity_check() == "ok"
    finally:
        log.close()


_HIDDEN = """
import durable


@durable.tool
async def hidden(x: int) -> int:
    return x


@durable.workflow
async def sneaky(x: int) -> int:
    return await globals()["hid" + "den"](x)
"""


def test_capability_the_walk_cannot_see_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool reached by a computed name is listed as used but not described, with the fix to apply."""
    mod = load_source(monkeypatch, "hidden_app", _HIDDEN)
    with durable.local_world(tmp_path) as world:
        assert asyncio.run(durable.run_workflow(mod.sneaky, 3, world=world, run_id=RUN_ID)) == 3
    assert _verify(tmp_path, "--workflow", "hidden_app:sneaky") == 0
    out = capsys.readouterr().out
    assert "Used but not in the recorded manifest (drift not checked; declare them with uses=[...]):" in out
    assert "- tools.hidden" in out
