"""FileLocks: one driver per name across processes, freed by the kernel when a holder dies."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from durable.store import FileLocks
from durable.store.locks._protocol import _OFD, SHARED_FILE

ofd = pytest.mark.skipif(_OFD is None, reason="F_OFD_SETLK is Linux's")


def test_two_lock_objects_on_one_folder_exclude_each_other_by_name(tmp_path: Path) -> None:
    """A name held through one FileLocks is refused through another; another name is free."""
    a, b = FileLocks(tmp_path), FileLocks(tmp_path)
    held = a.try_acquire("run:x")
    assert held is not None
    assert b.try_acquire("run:x") is None
    other = b.try_acquire("run:y")
    assert other is not None
    a.release(held)
    again = b.try_acquire("run:x")
    assert again is not None
    b.release(again)
    b.release(other)


def test_a_lock_object_refuses_a_name_it_already_holds_until_released(tmp_path: Path) -> None:
    """Two drives of one run in one process exclude each other as in two processes."""
    locks = FileLocks(tmp_path)
    held = locks.try_acquire("run:x")
    assert held is not None
    assert locks.try_acquire("run:x") is None
    locks.release(held)
    assert locks.try_acquire("run:x") is not None


def test_closing_the_lock_object_gives_back_every_lock_it_holds(tmp_path: Path) -> None:
    """After ``close()`` another holder takes the names at once; a late release is harmless."""
    a, b = FileLocks(tmp_path), FileLocks(tmp_path)
    held = [a.try_acquire(f"run:{i}") for i in range(3)]
    a.close()
    for h in held:
        a.release(h)  # the run that held it ends after its world closed
    assert all(b.try_acquire(f"run:{i}") is not None for i in range(3))


@ofd
def test_many_runs_create_no_file_of_their_own(tmp_path: Path) -> None:
    """On Linux every lock is a byte of one shared file: taking one creates nothing."""
    locks = FileLocks(tmp_path)
    for i in range(50):
        h = locks.try_acquire(f"run:{i}")
        assert h is not None
        locks.release(h)
    assert [p.name for p in tmp_path.iterdir()] == [SHARED_FILE]


_HOLD = """
import sys, time
from pathlib import Path
from durable.store import FileLocks
locks = FileLocks(Path(sys.argv[1]))
assert locks.try_acquire("run:x") is not None
print("held", flush=True)
time.sleep(600)
"""


def test_a_lock_held_by_a_sigkilled_process_comes_free(tmp_path: Path) -> None:
    """The kernel gives back the locks of a killed process: another process takes them."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as child:
        _take_after_kill(child, tmp_path)


def _take_after_kill(child: subprocess.Popen[str], tmp_path: Path) -> None:
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        locks = FileLocks(tmp_path)
        assert locks.try_acquire("run:x") is None
        child.kill()
        child.wait(timeout=30)
        deadline = time.monotonic() + 10
        got = locks.try_acquire("run:x")
        while got is None and time.monotonic() < deadline:
            time.sleep(0.01)
            got = locks.try_acquire("run:x")
        assert got is not None
    finally:
        child.kill()
        child.wait(timeout=30)
