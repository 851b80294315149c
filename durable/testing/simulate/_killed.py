"""Worker processes killed for real: the simulation's slow mode, SIGKILL instead of a simulated death.

``KilledWorker`` is the parent's handle of a worker process: it starts
``python -m durable.testing.simulate._worker CONFIG``, which builds one
version of a generated program's code, opens the world (a SQLite data
directory or a Postgres schema), and serves the simulation's queue; its
log SIGKILLs its own process before the append chosen as its crash point,
so it dies mid-drive as a killed process does (the kernel frees its file
locks; its Postgres lease runs out). The parent can also SIGKILL it at any
moment, or stop it with SIGTERM. The fakes note their side effects into a
ledger file the parent reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import durable
from durable.store import SqliteControl

from .. import CrashingLog, SimulatedCrash
from ._code import Code, factory
from ._ledger import Ledger
from ._program import Program

QUEUE = "sim"


class _KillingLog(CrashingLog):
    """A log whose process is SIGKILLed before the append that would cross its limit."""

    def append(self, batch: Any, *, sync: bool = True) -> None:
        try:
            super().append(batch, sync=sync)
        except SimulatedCrash:
            os.kill(os.getpid(), signal.SIGKILL)
            raise

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _world(config: dict[str, Any]) -> durable.World:
    if config["backend"] == "postgres":
        inner: durable.World = durable.postgres_world(
            config["dsn"], schema=config["schema"], lease=2.0, max_size=3
        )
    else:
        inner = durable.local_world(config["folder"])
        inner.control_store = SqliteControl(inner.data_dir / "runtime.db")  # type: ignore[operator]
    crash = config["crash_at"]
    log = _KillingLog(inner.log, max_appends=None if crash is None else crash - 1)
    world = durable.World(log, inner.locks, data_dir=inner.data_dir, artifacts=inner.artifacts)
    world.control_store = inner.control_store
    world.schedule_store = inner.schedule_store
    world.outer_loop_manifests = inner.outer_loop_manifests
    return world


async def _serve(config: dict[str, Any]) -> None:
    code = factory(config["program"])(config["version"], Ledger(config["ledger"]))
    world = _world(config)
    worker = durable.Worker(world, workflows=code.workflows(), queues=[QUEUE], name=config["name"])
    await worker.start()
    print("serving", flush=True)
    await worker.run(announce=False)


class KilledWorker:
    """The parent's handle of a worker process (see the module's docstring)."""

    def __init__(self, name: str, code: Code, crash_at: int | None, config: dict[str, Any]):
        self.name = name
        self.code = code
        self.crash_at = crash_at
        self.config = {**config, "version": code.version, "crash_at": crash_at, "name": name}
        self.dead = False
        self.death = ""
        self.worker: object | None = None
        self.proc: asyncio.subprocess.Process | None = None

    async def start_worker(self, queue: Any = None) -> None:
        """Start the process and wait until it serves the queue."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "durable.testing.simulate._worker",
            json.dumps(self.config),
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if b"serving" not in line:
            self.dead, self.death = True, "died before it served"
            return
        self.worker = self.proc

    def poll(self) -> bool:
        """Whether the process died by itself (its crash point): noted as dead."""
        if not self.dead and self.proc is not None and self.proc.returncode is not None:
            self.dead, self.death = True, f"SIGKILLed itself before append {self.crash_at}"
        return self.dead

    async def kill(self, why: str = "killed") -> None:
        """SIGKILL the process where it is."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()
        if not self.dead:
            self.dead, self.death = True, why

    async def reaped(self) -> None:
        if self.proc is not None:
            await self.proc.wait()

    async def stop_worker(self) -> None:
        """SIGTERM: the worker stops claiming and leaves its runs resumable."""
        self.worker = None
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            await self.proc.wait()
        self.dead, self.death = True, "stopped"

    async def close(self) -> None:
        await self.kill("closed")


def config_for(program: Program, storage: Any, ledger: Ledger) -> dict[str, Any]:
    """What a worker process needs to build the code and open the world."""
    return {
        "program": program,
        "backend": storage.kind,
        "folder": None if storage.folder is None else str(storage.folder / "data"),
        "dsn": storage.dsn,
        "schema": storage.schema,
        "ledger": str(ledger.path),
    }


def serve_main() -> None:
    """The worker process's entry (``python -m durable.testing.simulate._worker CONFIG``)."""
    asyncio.run(_serve(json.loads(sys.argv[1])))
