"""Worker processes of ``tests.helpers.procs.unhappy_app`` on SQLite or Postgres (unhappy-path tests)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durable
from tests.helpers import pg

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.helpers.procs.unhappy_app"


def wait_for(cond: Callable[[], Any], timeout: float = 30.0, what: str = "a condition") -> Any:
    """Poll ``cond`` until it is truthy (returned), or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def backend_env(kind: str, tmp: Path) -> dict[str, str]:
    """The environment of a child process whose world is SQLite in ``tmp`` or a new Postgres schema.

    ``DURABLE_TEST_DIR`` is ``tmp``; on Postgres ``DURABLE_TEST_PG_DSN`` and
    ``DURABLE_TEST_SCHEMA`` name the server and a fresh schema (the test drops it).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DURABLE_TEST_DIR": str(tmp)}
    env.pop("DURABLE_TEST_SCHEMA", None)
    if kind == "postgres":
        reason = pg.unavailable_reason()
        if reason is not None:
            pg.skip_or_fail(reason)
        env["DURABLE_TEST_SCHEMA"] = pg.new_schema()
        env["DURABLE_TEST_PG_DSN"] = os.environ[pg.ENV]
    else:
        env.pop("DURABLE_TEST_PG_DSN", None)
    return env


class Procs:
    """Worker processes serving the ``unhappy`` queue on one backend, and the test's own world on it."""

    def __init__(self, kind: str, tmp: Path):
        self.kind = kind
        self.tmp = tmp
        self.procs: list[subprocess.Popen[str]] = []
        self.env = backend_env(kind, tmp)
        from tests.helpers.procs import unhappy_app

        os.environ["DURABLE_TEST_DIR"] = str(tmp)  # the app's note() in this process too
        self.world = self._open()
        self.app = unhappy_app

    def _open(self) -> durable.World:
        if self.kind == "postgres":
            return durable.postgres_world(
                self.env["DURABLE_TEST_PG_DSN"], schema=self.env["DURABLE_TEST_SCHEMA"], lease=1.5, max_size=4
            )
        return durable.local_world(self.tmp / "data")

    def cli_args(self) -> list[str]:
        """The options that point ``little`` at this world."""
        if self.kind == "postgres":
            return ["--dsn", self.env["DURABLE_TEST_PG_DSN"], "--schema", self.env["DURABLE_TEST_SCHEMA"]]
        return ["--data-dir", str(self.tmp / "data")]

    def where(self) -> str:
        """What the fixes add to reach the world (a data directory outside the working directory)."""
        if self.kind == "sqlite":
            return f" --data-dir {self.tmp / 'data'}"
        return f" --schema {self.env['DURABLE_TEST_SCHEMA']}"

    def little(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``little`` in a process of its own (a person at the shell), ``extra`` in its environment."""
        return subprocess.run(
            [sys.executable, "-m", "durable.cli", *args, *self.cli_args()],
            cwd=ROOT,
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def little_line(self, line: str) -> subprocess.CompletedProcess[str]:
        """Run a command line exactly as a fix prints it (``little ...``), in a shell of its own."""
        assert line.startswith("little ")
        rest = shlex.split(line)[1:]
        if self.kind == "postgres":  # the DSN comes from $DURABLE_DSN, as for a person at the shell
            env = {**self.env, "DURABLE_DSN": self.env["DURABLE_TEST_PG_DSN"]}
        else:
            env = self.env
        return subprocess.run(
            [sys.executable, "-m", "durable.cli", *rest],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def worker(self, module: str = APP, **extra: str) -> subprocess.Popen[str]:
        """A worker process of ``module`` (the unhappy app), with ``extra`` in its environment."""
        with open(self.tmp / f"worker-{time.monotonic_ns()}.err", "w") as err:
            p = subprocess.Popen(
                [sys.executable, "-m", module],
                cwd=ROOT,
                env={**self.env, **extra},
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert p.stdout is not None
        assert "serving" in p.stdout.readline()
        self.procs.append(p)
        return p

    def kill(self, p: subprocess.Popen[str]) -> None:
        p.send_signal(signal.SIGKILL)
        p.wait()

    def stop(self, p: subprocess.Popen[str]) -> None:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)

    def bodies(self, **match: Any) -> list[dict[str, Any]]:
        path = self.tmp / "bodies.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r for r in rows if all(r.get(k) == v for k, v in match.items())]

    def status(self, run_id: str) -> durable.RunStatus:
        return durable.runtime.run_status(self.world, run_id)

    def ends(self, run_id: str, timeout: float = 30.0) -> durable.RunStatus:
        """Wait until the run is no longer enqueued or running, and its driver let go of it; its status.

        A run is marked blocked just before its drive releases the run's lock; a
        decision taken in between is refused as "being driven right now".
        """
        return wait_for(
            lambda: (
                (st := self.status(run_id)).status not in ("enqueued", "running")
                and durable.runtime.driver_of(self.world, run_id)["driver"] != "live"
                and st
            ),
            timeout,
            f"run {run_id} to end",
        )

    def events(self, run_id: str) -> int:
        return len(self.world.log.read(run_id))

    def settle(self) -> None:
        """Wait while the workers run several recovery passes: a healthy run with a timer completes."""
        h = durable.start_workflow(self.app.healthy, 0, world=self.world, queue=self.app.unhappy)
        wait_for(lambda: self.status(h.run_id).status == "completed", 60, "a healthy run")
        h2 = durable.start_workflow(self.app.healthy, 1, world=self.world, queue=self.app.unhappy)
        wait_for(lambda: self.status(h2.run_id).status == "completed", 60, "a second healthy run")

    def err_text(self) -> str:
        return "".join(p.read_text() for p in sorted(self.tmp.glob("worker-*.err")))

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
        self.world.close()
