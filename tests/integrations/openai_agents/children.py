"""Child processes of ``tests.helpers.procs.openai_agents_app`` on SQLite or Postgres: start, kill, count."""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import durable
from durable.engine import Recorded
from tests.helpers import pg
from tests.runtime.unhappy import backend_env

ROOT = Path(__file__).resolve().parents[3]
APP = "tests.helpers.procs.openai_agents_app"


class Children:
    """Processes of the agents app over one backend, and the test's own view of the world."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.kind = kind
        self.tmp = tmp
        self.env = backend_env(kind, tmp)
        self.procs: list[subprocess.Popen[str]] = []

    def world(self) -> durable.World:
        if self.kind == "postgres":
            return durable.postgres_world(
                self.env["DURABLE_TEST_PG_DSN"], schema=self.env["DURABLE_TEST_SCHEMA"], max_size=2
            )
        return durable.local_world(self.tmp / "data")

    def spawn(self, scenario: str, stop_at: str = "") -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", APP, scenario, stop_at],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def kill_at(self, scenario: str, stop_at: str) -> None:
        """Run ``scenario`` until ``stop_at`` starts, then SIGKILL the process."""
        proc = self.spawn(scenario, stop_at)
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=90), "the child never reached its stop point"
        line = proc.stdout.readline()
        assert line.strip() == f"STOPPED {stop_at}", line + (proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL

    def worker(self, stop_at: str = "") -> subprocess.Popen[str]:
        """A worker process of the app's queue ``agents``, serving once this returns."""
        proc = self.spawn("serve", stop_at)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving" in line, line + (proc.stderr.read() if proc.stderr else "")
        return proc

    def kill(self, proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)

    def finish(self, scenario: str) -> tuple[int, dict[str, Any]]:
        """Run ``scenario`` to its end in a new process; its exit code and last printed line."""
        proc = self.spawn(scenario)
        out, err = proc.communicate(timeout=120)
        lines = out.strip().splitlines()
        assert lines, err
        return proc.returncode, json.loads(lines[-1])

    def little(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``little ARGS`` in a process of its own, pointed at this world."""
        where = (
            ["--dsn", self.env["DURABLE_TEST_PG_DSN"], "--schema", self.env["DURABLE_TEST_SCHEMA"]]
            if self.kind == "postgres"
            else ["--data-dir", str(self.tmp / "data")]
        )
        return subprocess.run(
            [sys.executable, "-m", "durable.cli", *args, *where],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def bodies(self) -> Counter[str]:
        log = self.tmp / "bodies.log"
        return Counter(log.read_text().split() if log.exists() else [])

    def lines(self, name: str) -> list[str]:
        path = self.tmp / name
        return path.read_text().splitlines() if path.exists() else []

    def recorded(self) -> Recorded:
        with self.world() as world:
            return Recorded.from_rows(world.log.read("r"))

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=30)
        if self.kind == "postgres":
            pg.drop_schema(self.env["DURABLE_TEST_PG_DSN"], self.env["DURABLE_TEST_SCHEMA"])
