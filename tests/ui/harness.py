"""A real inspector for tests and screenshots: a seeded data directory and ``little ui`` in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import durable
from tests.ui import app

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = 'evil<img src=x onerror="window.__pwned=1">/?#"&'
"""A run id full of characters that would break a page that did not escape them."""


def seed(data_dir: Path) -> None:
    """Seed ``data_dir`` in a subprocess (Playwright's sync API keeps an event loop in this thread)."""
    code = "from pathlib import Path\nfrom tests.ui.harness import seed_here\n"
    code += f"seed_here(Path({str(data_dir)!r}))\n"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True, timeout=120)


def seed_here(data_dir: Path) -> None:
    """Runs of every finished kind: waiting for an answer, failed (hostile id), a parent with its child."""

    async def go() -> None:
        world = durable.local_world(data_dir)
        try:
            with contextlib.suppress(durable.RunInterrupted):
                await durable.run_workflow(app.approval, "cats", world=world, run_id="needs-answer")
            with contextlib.suppress(ValueError):
                await durable.run_workflow(app.failing, 3, world=world, run_id=HOSTILE)
            await durable.run_workflow(app.parent, "dogs", world=world, run_id="family")
            await seed_fork(world)
        finally:
            world.close()

    asyncio.run(go())


SMALL = {"researcher": "research-model", "writer": "small-writer"}
"""The models of the run ``support-small``; its fork ``support-big`` maps the writer to ``big-writer``."""


async def seed_fork(world: durable.World) -> None:
    """``support-small`` (steps, a tool, parallel calls, a session, a loop) and its fork ``support-big``."""
    await durable.run_workflow(app.support, "c-42", world=world, run_id="support-small", models=SMALL)
    fork = durable.fork(
        "support-small",
        "research",
        world=world,
        new_run_id="support-big",
        models={**SMALL, "writer": "big-writer"},
    )
    await durable.run_workflow(app.support, fork.input, world=world, run_id=fork.run_id, models=fork.models)


@dataclass
class Server:
    """A running ``little ui``: its address (token included), token, port and process."""

    url: str
    token: str
    port: int
    proc: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def env() -> dict[str, str]:
    """The environment of the subprocesses: this checkout first on the path."""
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@contextlib.contextmanager
def serve(data_dir: Path, *extra: str) -> Iterator[Server]:
    """Start ``little ui --port 0`` over ``data_dir`` and stop it (SIGTERM) afterwards."""
    log = (data_dir.parent / "little-ui.log").open("w")  # the server's own log lines, for a failing test
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable.cli",
            "ui",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--workflow",
            "tests.ui.app:approval",
            "--workflow",
            "tests.ui.app:ticking",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=ROOT,
        env=env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"(http://[^\s]+:(\d+)/\?token=(\S+))", line)
        if m is None:
            proc.kill()
            raise RuntimeError(f"little ui did not print its address: {line!r}")
        yield Server(m.group(1), m.group(3), int(m.group(2)), proc)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()


def start_driver(data_dir: Path, run_id: str, n: int) -> subprocess.Popen[str]:
    """Another process that starts ``ticking(n)`` as ``run_id`` and drives it until it ends."""
    code = (
        "import asyncio, logging, durable\n"
        "logging.basicConfig(level=logging.DEBUG)\n"
        "from tests.ui import app\n"
        "async def main():\n"
        f"    w = durable.local_world({str(data_dir)!r})\n"
        f"    h = durable.start_workflow(app.ticking, {n}, world=w, run_id={run_id!r})\n"
        "    try:\n"
        "        await h.result()\n"
        "    except durable.RunCancelledError:\n"
        "        pass\n"
        "asyncio.run(main())\n"
    )
    with (data_dir.parent / f"driver-{run_id}.log").open("w") as log:  # its own lines, for a failing test
        return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env(), text=True, stderr=log)


def listening_addresses(port: int) -> list[str]:
    """The local addresses of the sockets listening on ``port``, read from /proc/net/tcp{,6}."""
    out = []
    for name, width in (("tcp", 8), ("tcp6", 32)):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr, _, hexport = local.partition(":")
            if state != "0A" or int(hexport, 16) != port:  # 0A: LISTEN
                continue
            if width == 8:
                out.append(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
            else:
                out.append(addr)
    return out


def wait_for_run(data_dir: Path, run_id: str, timeout: float = 30.0) -> None:
    """Block until the run has a log in ``data_dir`` (its driver in another process started it)."""
    import time

    deadline = time.monotonic() + timeout
    world = durable.local_world(data_dir)
    try:
        while world.log.info(run_id) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id!r} did not start within {timeout} s")
            time.sleep(0.05)
    finally:
        world.close()
