"""`little verify` and `little compact` over several runs and `--all`, on a real SQLite data directory."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.cli import main
from tests.cli.bulk_app import FINISHED, WAITING, seed

CHILD = "family:workflow:child#0"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    seed(path)
    return path


def little(capsys: pytest.CaptureFixture[str], data_dir: Path, *argv: str) -> tuple[int, Any, str]:
    """Run `little` in-process with ``--json``; the exit status, the parsed output and stderr."""
    code = main([*argv, "--data-dir", str(data_dir), "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else None, err


def event_types(data_dir: Path, run_id: str) -> list[str]:
    with durable.local_world(data_dir) as world:
        return [type_ for _, type_, _ in world.log.read(run_id)]


def drop_event(data_dir: Path, run_id: str, seq: int) -> None:
    """Delete one event from the file, as damage or a hand edit would."""
    db = sqlite3.connect(data_dir / "events.db")
    db.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", (run_id, seq))
    db.commit()
    db.close()


def test_verify_of_one_id_keeps_the_single_run_report(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little verify RUN_ID` prints the report it always has (its run_id, the runs it covered)."""
    code, report, _ = little(capsys, data_dir, "verify", "family")
    assert code == 0
    assert report["run_id"] == "family" and report["runs"] == ["family", CHILD]
    assert "runs_checked" not in report


def test_verify_of_several_ids_is_one_report_with_a_result_each(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two ids give one aggregated report: ok, how many runs were checked, one result per run."""
    code, report, _ = little(capsys, data_dir, "verify", "ok-1", "family")
    assert code == 0
    assert report["ok"] is True and report["runs_checked"] == 2 and report["child_runs_checked"] == 1
    assert [(r["run_id"], r["ok"]) for r in report["results"]] == [("ok-1", True), ("family", True)]
    assert report["problems"] == [] and report["runs_with_findings"] == []


def test_verify_all_checks_every_run_exactly_once(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--all` checks each top-level run with its child runs, so every run in the world is covered once."""
    code, report, _ = little(capsys, data_dir, "verify", "--all")
    assert code == 0 and report["ok"] is True
    covered = [run for r in report["results"] for run in r["runs"]]
    assert sorted(covered) == sorted([*FINISHED, WAITING, CHILD])
    assert report["runs_checked"] == len(FINISHED) + 1


def test_verify_all_names_the_damaged_run_and_exits_1(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gap in one run's log is a finding naming that run; the others are reported ok."""
    drop_event(data_dir, "ok-2", 2)
    code, report, _ = little(capsys, data_dir, "verify", "--all")
    assert code == 1 and report["ok"] is False
    assert report["runs_with_findings"] == ["ok-2"]
    assert report["problems"] and {p["run_id"] for p in report["problems"]} == {"ok-2"}
    assert any("seq gap" in p["problem"] for p in report["problems"])
    assert all(r["ok"] for r in report["results"] if r["run_id"] != "ok-2")


def test_verify_all_text_lists_problems_by_run(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json the aggregated report says NOT OK and prefixes each problem with its run."""
    drop_event(data_dir, "bad", 2)
    assert main(["verify", "--all", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"verified {len(FINISHED) + 1} run(s): NOT OK (1 with findings)")
    assert "\n- bad: run 'bad': seq gap" in out


def test_verify_of_an_unknown_id_among_others_is_a_finding(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id with no run is a problem of that id; the other runs are still checked."""
    code, report, _ = little(capsys, data_dir, "verify", "ok-1", "ghost")
    assert code == 1
    assert [(r["run_id"], r["ok"]) for r in report["results"]] == [("ok-1", True), ("ghost", False)]
    assert [p["run_id"] for p in report["problems"]] == ["ghost"]
    assert "no run 'ghost'" in report["problems"][0]["problem"]


def test_verify_all_with_a_workflow_checks_only_its_runs(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--all --workflow` checks drift for the runs of that workflow and leaves the others out."""
    code, report, _ = little(capsys, data_dir, "verify", "--all", "--workflow", "tests.cli.bulk_app:sums")
    assert code == 0 and report["drift_checked"] is True
    assert sorted(r["run_id"] for r in report["results"]) == ["ok-1", "ok-2", "ok-3"]


def test_compact_all_compacts_finished_runs_and_skips_a_waiting_one(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Completed, failed and cancelled runs become one snapshot; an interrupted run is skipped and counted."""
    before = event_types(data_dir, WAITING)
    code, data, _ = little(capsys, data_dir, "compact", "--all", "--vacuum")
    assert code == 0 and data["ok"] is True
    assert sorted(c["run_id"] for c in data["compacted"]) == sorted([*FINISHED, CHILD])
    assert data["skipped"]["count"] == 1 and data["skipped"]["by_status"] == {"interrupted": 1}
    assert data["vacuumed"] is True and data["failed"] == []
    for run_id in [*FINISHED, CHILD]:
        assert event_types(data_dir, run_id) == ["snapshot"]
    assert event_types(data_dir, WAITING) == before


def test_compact_all_again_leaves_compacted_runs_alone(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second `compact --all` finds every finished run one snapshot already and rewrites none."""
    assert little(capsys, data_dir, "compact", "--all")[0] == 0
    code, data, _ = little(capsys, data_dir, "compact", "--all")
    assert code == 0
    assert data["compacted"] == [] and sorted(data["already_compact"]) == sorted([*FINISHED, CHILD])


def test_compact_all_keeps_the_state_replay_shows(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After `compact --all`, `little replay` of a run shows the same state as before."""
    before = little(capsys, data_dir, "replay", "family")[1]
    assert little(capsys, data_dir, "compact", "--all")[0] == 0
    assert little(capsys, data_dir, "replay", "family")[1] == before


def test_compact_all_with_a_status_compacts_only_those(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--all --status failed --status cancelled` compacts the failed and the cancelled run only."""
    code, data, _ = little(
        capsys, data_dir, "compact", "--all", "--status", "failed", "--status", "cancelled"
    )
    assert code == 0
    assert sorted(c["run_id"] for c in data["compacted"]) == ["bad", "gone"]
    assert event_types(data_dir, "ok-1") != ["snapshot"]


def test_a_run_a_live_driver_holds_fails_and_the_others_are_compacted(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose lock is held is reported as failed (run_busy), the rest compact, and the status is 1."""
    with durable.local_world(data_dir) as driver:
        held = driver.locks.try_acquire("run:ok-2")  # what a live driver of ok-2 holds
        assert held is not None
        try:
            before = event_types(data_dir, "ok-2")
            code, data, _ = little(capsys, data_dir, "compact", "ok-1", "ok-2", "ok-3", "ghost")
        finally:
            driver.locks.release(held)
    assert code == 1 and data["ok"] is False
    assert [c["run_id"] for c in data["compacted"]] == ["ok-1", "ok-3"]
    assert [(f["run_id"], f["reason"]) for f in data["failed"]] == [("ok-2", "run_busy"), ("ghost", None)]
    assert "another caller is driving it" in data["failed"][0]["error"]
    assert "no run 'ghost'" in data["failed"][1]["error"]
    assert event_types(data_dir, "ok-2") == before
    assert event_types(data_dir, "ok-3") == ["snapshot"]


def test_compact_text_says_what_was_skipped_and_what_failed(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json the report counts the compacted runs, the skipped ones and why, and each failure."""
    with durable.local_world(data_dir) as driver:
        held = driver.locks.try_acquire("run:bad")
        try:
            code = main(["compact", "--all", "--data-dir", str(data_dir)])
        finally:
            driver.locks.release(held)
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].startswith(f"compacted {len(FINISHED)} run(s), replacing ")
    assert out[1].startswith("skipped 1 run(s) that have not finished (interrupted: 1)")
    assert out[2:] == [
        "failed to compact 1 run(s):",
        "  bad: cannot compact run 'bad': another caller is driving it right now. "
        "Wait until it stops, then try again.",
    ]


def test_compact_of_one_id_keeps_its_output(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`little compact RUN_ID` prints the one compaction as before, and an unknown id is an error."""
    code, data, _ = little(capsys, data_dir, "compact", "ok-1")
    assert code == 0
    assert set(data) == {"run_id", "snapshot_seq", "events_replaced", "state_hash", "vacuumed"}
    code, data, err = little(capsys, data_dir, "compact", "ghost")
    assert (code, data) == (1, None) and "no run 'ghost'" in err


def _interrupting(real: Any, on_call: int) -> Any:
    """``real``, except that its ``on_call``-th call raises KeyboardInterrupt (Ctrl-C at that moment)."""
    calls = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == on_call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return wrapper


def test_ctrl_c_stops_compact_between_runs_and_says_how_far_it_got(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the third compaction keeps the two done, leaves the rest, and exits 130."""
    from durable.cli import _bulk

    monkeypatch.setattr(_bulk, "compact", _interrupting(_bulk.compact, 3))
    code, data, _ = little(capsys, data_dir, "compact", "ok-1", "ok-2", "ok-3", "bad")
    assert code == 130 and data["ok"] is False
    assert data["stopped"] == {"after": 2, "of": 4}
    assert [c["run_id"] for c in data["compacted"]] == ["ok-1", "ok-2"]
    assert event_types(data_dir, "ok-3") != ["snapshot"] and event_types(data_dir, "bad") != ["snapshot"]


def test_ctrl_c_before_any_compaction_says_so_in_the_text(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --json the last line says where Ctrl-C stopped and what to do about the rest."""
    from durable.cli import _bulk

    monkeypatch.setattr(_bulk, "compact", _interrupting(_bulk.compact, 1))
    assert main(["compact", "ok-1", "bad", "--data-dir", str(data_dir)]) == 130
    assert capsys.readouterr().out.splitlines()[-1] == (
        "stopped by Ctrl-C after 0 of 2 run(s); the rest were not compacted: run the command again for them"
    )


def test_ctrl_c_stops_verify_and_the_report_is_not_ok(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verify stopped by Ctrl-C reports the runs it checked, is not ok, and exits 130."""
    from durable.cli import _bulk

    monkeypatch.setattr(_bulk, "verify_run", _interrupting(_bulk.verify_run, 2))
    code, report, _ = little(capsys, data_dir, "verify", "--all")
    assert code == 130 and report["ok"] is False
    assert report["runs_checked"] == 1 and report["stopped"] == {"after": 1, "of": len(FINISHED) + 1}


def test_ctrl_c_stops_gc_with_one_line_saying_how_far_it_got(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during gc is one line on stderr with the runs handled so far, not a traceback."""
    from durable.cli import _history

    def gc(**kwargs: Any) -> list[str]:
        kwargs["progress"](0, 5)
        kwargs["progress"](1, 5)
        raise KeyboardInterrupt

    monkeypatch.setattr(_history, "gc", gc)
    code = main(["gc", "--older-than", "0s", "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith("little: stopped by Ctrl-C after 1 of 5 run(s), each deleted whole; ")
    assert err.endswith("run little gc again for the rest\n")
