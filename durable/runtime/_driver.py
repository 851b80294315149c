"""Driving runs in the background of a process: one task per run, watched for cancellation.

A ``Driver`` belongs to one owner (a worker, or the process that called
``start_workflow`` without a queue). It holds the run's lock for as long as
its task drives the run, so that another process sees a live driver; when
the process dies the kernel frees the lock and any worker recovers the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from .._runner import drive
from .._spec import Spec
from .._world import WorldCore
from ..errors import FencedError, RunCancelled, RunCancelledError, RunInterrupted
from ..store._control import ControlRecord, MemoryControl, RunControl
from ..store._sqlite_control import SqliteControl
from ._guard import RunGuard, WorkerStopping

log = logging.getLogger("durable.runtime")

WATCH_INTERVAL = 0.05
"""Seconds between two reads of the cancellation requests of the runs a driver drives."""

STOP_GRACE = 30.0
"""Seconds a stopping driver waits for its runs to reach a durable point before cancelling them."""

HOST = socket.gethostname()

_LIVE: dict[tuple[object, str], RunGuard] = {}
"""The guards of the runs this process drives, by world and run id (a cancel here is seen at once)."""


def world_key(world: WorldCore) -> object:
    """What identifies a world within this process (its data directory, or the object)."""
    return str(world.data_dir.resolve()) if world.data_dir is not None else id(world.log)


def control_of(world: WorldCore) -> RunControl:
    """The world's control store, opened on first use (``runtime.db`` beside ``events.db``)."""
    ctl: RunControl | None = world.extensions.get("control")
    if ctl is None:
        ctl = SqliteControl(world.data_dir / "runtime.db") if world.data_dir is not None else MemoryControl()
        world.extensions["control"] = ctl
    return ctl


def live_guard(world: WorldCore, run_id: str) -> RunGuard | None:
    """The guard of a run this process drives now, or ``None``."""
    return _LIVE.get((world_key(world), run_id))


def owner_name(name: str | None) -> str:
    """A driver's name: the given one, or ``host:pid:random``."""
    return name or f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Driver:
    """Runs driven by one owner in this process's event loop.

    Args:
        world: The world.
        owner: The owner's name, recorded in each claim.
        on_done: Called with the run id when a run's task ends.
    """

    def __init__(self, world: WorldCore, owner: str, on_done: Callable[[str], None] | None = None):
        self.world = world
        self.owner = owner
        self.control = control_of(world)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.guards: dict[str, RunGuard] = {}
        self.on_done = on_done
        self._watch: asyncio.Task[None] | None = None
        self._key = world_key(world)

    def lock(self, run_id: str) -> object | None:
        """Take the run's lock now, or ``None`` when another driver holds it."""
        return self.world.locks.try_acquire(f"run:{run_id}")

    def spawn(self, spec: Spec, rec: ControlRecord, lock: object) -> asyncio.Task[None]:
        """Drive the run in a task of its own; the task releases ``lock`` when it ends."""
        rid = rec.run_id
        guard = RunGuard(rid)
        if rec.cancel_reason is not None:  # asked while nobody drove it
            guard.cancel(rec.cancel_reason)
        self.guards[rid] = guard
        _LIVE[(self._key, rid)] = guard
        task = asyncio.get_running_loop().create_task(
            self._drive(spec, rec, lock, guard), name=f"durable:{rid}"
        )
        self.tasks[rid] = task
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._watch_loop())
        return task

    async def _drive(self, spec: Spec, rec: ControlRecord, lock: object, guard: RunGuard) -> None:
        world, rid, ctl = self.world, rec.run_id, self.control
        state: str | None = "done"
        try:
            started = world.log.read(rid)[:1]
            recorded = json.loads(started[0][2]) if started and started[0][1] == "run.started" else None
            value = recorded.get("input") if recorded is not None else json.loads(rec.input)
            models = recorded.get("models", {}) if recorded is not None else json.loads(rec.models)
            await drive(
                spec,
                value,
                world,
                run_id=rid,
                models=models,
                guard=guard,
                deadline=rec.deadline,
                lock_held=True,
                resume_cancelled=rec.resume == "cancelled",
                retry_failed=rec.resume == "failed",
                traceparent=rec.traceparent,
            )
        except (RunCancelled, RunCancelledError):
            state = "cancelled"
        except RunInterrupted:
            pass
        except (WorkerStopping, FencedError, asyncio.CancelledError):
            state = None  # left claimed: resumable by the next worker
        except Exception as exc:
            if not _recorded_failure(world, rid):
                log.warning("run %s stopped without a recorded outcome: %s", rid, str(exc).splitlines()[0])
        finally:
            self.world.locks.release(lock)
            if state is not None:
                with contextlib.suppress(Exception):
                    ctl.finish(rid, state)
            self.tasks.pop(rid, None)
            self.guards.pop(rid, None)
            if _LIVE.get((self._key, rid)) is guard:
                del _LIVE[(self._key, rid)]
            if self.on_done is not None:
                self.on_done(rid)

    async def _watch_loop(self) -> None:
        """Read the cancellation requests of the driven runs while there are any."""
        while self.guards:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                requests = self.control.cancel_requests(list(self.guards))
            except Exception:  # a busy store: the next round reads again
                continue
            for rid, reason in requests.items():
                guard = self.guards.get(rid)
                if guard is not None:
                    guard.cancel(reason)

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Halt every run at its next durable point and wait for the tasks (cancelled after ``grace``)."""
        for guard in list(self.guards.values()):
            guard.stop()
        tasks = list(self.tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch


def _recorded_failure(world: WorldCore, run_id: str) -> bool:
    info = world.log.info(run_id)
    return info is not None and info.status != "running"


_DEFAULT: dict[object, Driver] = {}


def default_driver(world: WorldCore) -> Driver:
    """The driver of the runs this process starts without a queue (one per world)."""
    key = world_key(world)
    d = _DEFAULT.get(key)
    if d is None or d.world is not world:
        d = Driver(world, owner_name(None))
        _DEFAULT[key] = d
    return d


def record_for(world: WorldCore, run_id: str) -> ControlRecord | None:
    """The run's control record (``None`` when it has none)."""
    return control_of(world).get(run_id)


def drop_default(world: WorldCore) -> None:
    """Forget the default driver of a world (tests close worlds)."""
    _DEFAULT.pop(world_key(world), None)


def describe(rec: ControlRecord) -> dict[str, Any]:
    """A control record as plain data."""
    return {
        "queue": rec.queue,
        "partition_key": rec.partition_key,
        "priority": rec.priority,
        "owner": rec.owner,
        "pid": rec.pid,
        "host": rec.host,
        "cancel_reason": rec.cancel_reason,
    }
