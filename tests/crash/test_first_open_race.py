"""Opening events.db: racing first opens wait, and another application's database is refused untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import durable
from durable.errors import LogCorruptedError, LogFormatError

_OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import durable
    from durable.errors import DurableError

    root, start, rounds, gap = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    for i in range(rounds):
        while time.time() < start + i * gap:
            pass
        try:
            with durable.local_world(root / str(i)) as world:
                world.runs()
            print("ok", flush=True)
        except DurableError as exc:
            print(f"{type(exc).__name__}: {exc}".replace(chr(10), " "), flush=True)
    """
)


def test_processes_racing_on_a_fresh_data_directory_all_open_it(tmp_path: Path) -> None:
    """Six processes open the same new data directory at once, round after round: every open succeeds."""
    script = tmp_path / "opener.py"
    script.write_text(_OPENER)
    procs, rounds, gap = 6, 30, 0.15
    start = time.time() + 3.0  # every process has imported durable by then
    running = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "dirs"), str(start), str(rounds), str(gap)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(procs)
    ]
    lines: list[str] = []
    for p in running:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        lines += out.splitlines()
    assert len(lines) == procs * rounds
    failures = [line for line in lines if line != "ok"]
    assert failures == []
    for i in range(rounds):  # and each directory holds one sound log
        with durable.local_world(tmp_path / "dirs" / str(i)) as world:
            assert world.log.integrity_check() == "ok"  # type: ignore[attr-defined]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign(path: Path, *, user_version: int = 0) -> Path:
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT, at TEXT);"
        "CREATE TABLE attendees (event_id INTEGER, person TEXT);"
        "INSERT INTO events (name, at) VALUES ('launch', '2026-01-01');"
        f"PRAGMA user_version={user_version};"
    )
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("user_version", [0, 1, 7])
def test_another_applications_database_is_refused_untouched(tmp_path: Path, user_version: int) -> None:
    """A calendar app's database with a table named events is refused; its bytes stay the same."""
    data = tmp_path / "data"
    data.mkdir()
    db = _foreign(data / "events.db", user_version=user_version)
    before = _digest(db)
    for _ in range(2):  # a second try finds it just as it was
        with pytest.raises(LogCorruptedError, match="another database") as err:
            durable.local_world(data)
        assert "data directory of its own" in str(err.value)
        assert not isinstance(err.value, LogFormatError)
    assert _digest(db) == before
    assert sorted(p.name for p in data.iterdir() if p.name.startswith("events.db")) == ["events.db"]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("SELECT name FROM events").fetchall() == [("launch",)]
    conn.close()


def test_the_cli_refuses_another_database_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little runs` on a foreign events.db says what it is, without a traceback, and changes nothing."""
    from durable.cli import main

    data = tmp_path / "data"
    data.mkdir()
    db = _foreign(data / "events.db")
    before = _digest(db)
    assert main(["runs", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err
    assert "another database" in err and "Traceback" not in err
    assert _digest(db) == before


def test_a_durable_log_still_opens_and_a_newer_one_is_a_format_error(tmp_path: Path) -> None:
    """The log's own schema is recognised; a newer schema version of it is LogFormatError."""
    with durable.local_world(tmp_path / "a") as world:
        world.runs()
    with durable.local_world(tmp_path / "a") as world:
        assert world.runs() == []
    conn = sqlite3.connect(tmp_path / "a" / "events.db")
    conn.execute("PRAGMA user_version=3")
    conn.close()
    with pytest.raises(LogFormatError, match="newer"):
        durable.local_world(tmp_path / "a")
