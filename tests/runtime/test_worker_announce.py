"""``Worker.run()`` in a plain script says on stderr that it serves, and that it stopped."""

from __future__ import annotations

import asyncio
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import durable

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    import durable

    @durable.workflow
    async def digest(day: str) -> str:
        return day

    async def main() -> None:
        with durable.local_world(sys.argv[1]) as world:
            worker = durable.Worker(world, workflows=[digest], queues=["emails"])
            await worker.run()

    asyncio.run(main())
    """
)


def _serve_then_stop(tmp_path: Path) -> tuple[str, str]:
    """Start the script, wait for its first stderr line (30 s at most), SIGTERM it; (first line, the rest)."""
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "data")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        stream = proc.stderr
        assert stream is not None
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True)
        reader.start()
        try:
            first = lines.get(timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
            reader.join(timeout=30)
    return first, "".join(lines.queue)


def test_worker_run_announces_its_start_and_stop_on_stderr(tmp_path: Path) -> None:
    """The start line names the worker, its workflows and queues, and how to stop it; a stop line follows."""
    first, rest = _serve_then_stop(tmp_path)
    assert first.startswith("durable worker ") and "digest" in first and "emails" in first
    assert "SIGTERM" in first
    assert "stopped" in rest


@durable.workflow
async def digest(day: str) -> str:
    return day


async def _run_and_stop(worker: durable.Worker, **options: bool) -> None:
    serving = asyncio.create_task(worker.run(**options))
    for _ in range(1000):  # until the worker serves (bounded: 10 s)
        if worker._task is not None:
            break
        await asyncio.sleep(0.01)
    assert worker._task is not None
    await worker.stop()
    await asyncio.wait_for(serving, 30)


def test_worker_run_is_quiet_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``run(announce=False)`` (what ``little worker``, which prints its own line, uses) writes nothing."""
    with durable.local_world(tmp_path / "data") as world:
        asyncio.run(_run_and_stop(durable.Worker(world, workflows=[digest]), announce=False))
    assert capsys.readouterr().err == ""


def test_worker_run_announces_in_process_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """By default the lines go to the stderr of the moment, a worker without queues saying so."""
    with durable.local_world(tmp_path / "data") as world:
        worker = durable.Worker(world, workflows=[digest])
        asyncio.run(_run_and_stop(worker))
    err = capsys.readouterr().err
    assert f"durable worker {worker.name}: workflows digest; queues (none: recovery only)" in err
    assert err.rstrip().endswith(f"durable worker {worker.name}: stopped")
