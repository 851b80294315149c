"""Run `little` in a child process with some of its output on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

LITTLE = [sys.executable, "-m", "durable.cli"]


def on_a_terminal(
    argv: list[str], environ: dict[str, str], cwd: Path, *, stdout: bool = True, stderr: bool = False
) -> tuple[int, str, str, str]:
    """Run ``little argv`` with ``stdout`` and/or ``stderr`` on one pseudo-terminal, the rest piped.

    Returns the exit status, what the stdout and stderr pipes read (empty for
    a stream on the terminal), and everything the terminal showed.
    """
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [*LITTLE, *argv],
            stdout=follower if stdout else subprocess.PIPE,
            stderr=follower if stderr else subprocess.PIPE,
            cwd=cwd,
            env=environ,
            timeout=120,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    piped = ((proc.stdout or b"").decode(), (proc.stderr or b"").decode())
    return proc.returncode, piped[0], piped[1], b"".join(chunks).decode()
