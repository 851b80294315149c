"""Simulated processes: each a world object of its own over a scenario's shared storage.

A ``Proc`` is what a process of the application would be: its own world
object (its own connections, locks and runtime state) over the storage every
process of the scenario shares (a memory log, a data directory, a Postgres
schema), running one version of the code, as a worker or as the caller of
``run_workflow``. It dies at an append chosen in advance (its log raises
``SimulatedCrash`` there and writes nothing more) or when told to; then
every store it holds refuses it, every task it started is cancelled, and
its locks are freed, as the kernel frees a killed process's.

The tasks of a process are those created while it is the current process
(a context variable copied into every task a task creates), found by the
event loop's task factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import durable
from durable.store import (
    MemoryArtifacts,
    MemoryControl,
    MemoryLocks,
    MemoryLog,
    MemorySchedules,
    MessageStore,
    SqliteControl,
    messages_for,
)

from .. import CrashingLog, SimulatedCrash
from ._code import Code

CURRENT: contextvars.ContextVar[Proc | None] = contextvars.ContextVar("durable_sim_proc", default=None)

BACKENDS = ("memory", "sqlite", "postgres")


class Storage:
    """What a scenario's processes share: a memory log, a data directory, or a Postgres schema.

    Args:
        kind: ``memory``, ``sqlite`` or ``postgres``.
        dsn: The Postgres server (``postgres`` only).
        folder: Where a SQLite data directory goes (a temporary one when ``None``).
    """

    def __init__(self, kind: str, *, dsn: str | None = None, folder: Path | None = None):
        if kind not in BACKENDS:
            raise durable.ConfigurationError(f"backend must be one of {BACKENDS}, not {kind!r}.")
        self.kind = kind
        self.dsn = dsn
        self.schema: str | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.folder = folder
        if kind == "sqlite" and folder is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="durable-sim-")
            self.folder = Path(self._tmp.name)
        if kind == "postgres":
            if not dsn:
                raise durable.ConfigurationError("the postgres backend needs dsn= (a PostgreSQL server).")
            import uuid

            self.schema = f"sim_{uuid.uuid4().hex[:12]}"
        self._memory: dict[str, Any] = {}
        if kind == "memory":
            self._memory = {
                "log": MemoryLog(),
                "locks": MemoryLocks(),
                "artifacts": MemoryArtifacts(),
                "control_store": MemoryControl(),
                "schedule_store": MemorySchedules(),
                "outer_loop_manifests": {},
            }
        self.view = self.open()  # the simulator's own look at the world (never crashes)
        self.commits: dict[str, set[int]] = {}  # by run, the last seq of each append a process made

    def open(self) -> durable.World:
        """A new world object over the storage (a process's own connections)."""
        if self.kind == "sqlite":
            assert self.folder is not None
            world = durable.local_world(self.folder / "data")
            world.control_store = SqliteControl(self.folder / "data" / "runtime.db")
            return world
        if self.kind == "postgres":
            assert self.dsn is not None
            assert self.schema is not None
            return durable.postgres_world(self.dsn, schema=self.schema, lease=2.0, max_size=3)
        m = self._memory
        world = durable.World(m["log"], m["locks"], artifacts=m["artifacts"])
        for name in ("control_store", "schedule_store", "outer_loop_manifests"):
            setattr(world, name, m[name])
        return world

    def close(self) -> None:
        """Close the simulator's world and drop what the storage holds."""
        self.view.close()
        if self.kind == "postgres" and self.schema is not None:
            import psycopg

            assert self.dsn is not None
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        if self._tmp is not None:
            self._tmp.cleanup()


class _Guarded:
    """A store of a process: every call is refused once the process is dead."""

    def __init__(self, inner: Any, proc: Proc):
        self._inner = inner
        self._proc = proc

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        proc = self._proc

        def call(*args: Any, **kwargs: Any) -> Any:
            if proc.dead:
                raise SimulatedCrash(f"process {proc.name} is dead")
            return value(*args, **kwargs)

        return call


class _Locks(_Guarded):
    """A process's locks: the ones it holds are freed when it dies (the kernel's job)."""

    def __init__(self, inner: Any, proc: Proc):
        super().__init__(inner, proc)
        self.held: list[object] = []

    def try_acquire(self, name: str) -> object | None:
        if self._proc.dead:
            raise SimulatedCrash(f"process {self._proc.name} is dead")
        got: object | None = self._inner.try_acquire(name)
        if got is not None:
            self.held.append(got)
        return got

    def release(self, handle: object) -> None:
        if handle in self.held:
            self.held.remove(handle)
            self._inner.release(handle)

    def free_all(self) -> None:
        for handle in self.held:
            self._inner.release(handle)
        self.held.clear()


class _DyingLog(CrashingLog):
    """A process's log: it dies at the chosen append, or with its process."""

    def __init__(self, inner: Any, proc: Proc, max_appends: int | None):
        super().__init__(inner, max_appends=max_appends)
        self._proc = proc

    def append(self, batch: Any, *, sync: bool = True) -> None:
        if self._proc.dead:
            self.crashed = True
        try:
            super().append(batch, sync=sync)
        except SimulatedCrash:
            self._proc.die(f"crashed before append {self.appends_written + 1}")
            raise
        for a in batch:  # where a transaction ends: a crash leaves the log there or at another end
            if a.rows:
                self._proc.storage.commits.setdefault(a.run_id, set()).add(a.rows[-1][0])

    def read(self, run_id: str, after_seq: int = 0) -> Any:
        self._alive()
        return super().read(run_id, after_seq)

    def fence(self, run_id: str) -> int:
        self._alive()
        return super().fence(run_id)

    def message_store(self) -> MessageStore:
        guarded: MessageStore = _Guarded(messages_for(self.inner), self._proc)
        return guarded

    def _alive(self) -> None:
        if self._proc.dead:
            raise SimulatedCrash(f"process {self._proc.name} is dead")

    def __getattr__(self, name: str) -> Any:  # what a backend adds to the protocol (last_row, ...)
        return getattr(self.inner, name)


class Proc:
    """One simulated process: a world object of its own, one version of the code, a crash point.

    Args:
        storage: The scenario's storage.
        name: The process's name (a worker's name in claims).
        code: The version of the code it runs.
        crash_at: It dies before its ``crash_at``-th append (``None``: it does not crash).
        on_death: Called with the process when it dies.
    """

    def __init__(
        self,
        storage: Storage,
        name: str,
        code: Code,
        crash_at: int | None = None,
        on_death: Callable[[Proc], None] | None = None,
    ):
        self.name = name
        self.storage = storage
        self.code = code
        self.dead = False
        self.death = ""
        self.tasks: set[asyncio.Task[Any]] = set()
        self.worker: durable.Worker | None = None
        self.on_death = on_death
        self.crash_at = crash_at
        inner = self.inner = storage.open()
        self.log = _DyingLog(inner.log, self, None if crash_at is None else crash_at - 1)
        self.locks = _Locks(inner.locks, self)
        world = durable.World(
            self.log,
            self.locks,
            data_dir=inner.data_dir,
            artifacts=inner.artifacts,
        )
        world.control_store = _Guarded(inner.control_store, self)
        world.schedule_store = inner.schedule_store
        world.outer_loop_manifests = inner.outer_loop_manifests
        self.world = world
        self._reaped: asyncio.Future[None] | None = None

    @property
    def appends(self) -> int:
        """Appends this process wrote."""
        return self.log.appends_written

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task of this process (every task it creates is the process's too)."""
        ctx = contextvars.copy_context()
        ctx.run(CURRENT.set, self)
        return asyncio.get_running_loop().create_task(coro, context=ctx)

    async def start_worker(self, queue: durable.Queue) -> None:
        """Start a ``Worker`` of this process's code on ``queue``."""

        async def start() -> None:
            self.worker = durable.Worker(
                self.world, workflows=self.code.workflows(), queues=[queue], name=self.name
            )
            await self.worker.start()

        try:
            await self.spawn(start())
        except BaseException:
            if not self.dead:
                raise  # it died while it started: noted as its death

    async def stop_worker(self) -> None:
        """Stop the worker gracefully (a deploy's old process leaving): its runs stay resumable."""
        worker, self.worker = self.worker, None
        if worker is not None and not self.dead:
            try:
                await self.spawn(worker.stop())
            except BaseException:
                if not self.dead:
                    raise  # a stop that failed by itself; a dead process's is not news

    def die(self, why: str) -> None:
        """The process is dead from now on: nothing it does reaches any store."""
        if self.dead:
            return
        self.dead = True
        self.death = why
        loop = asyncio.get_running_loop()
        self._reaped = loop.create_future()
        loop.call_soon(lambda: loop.create_task(self._reap()))
        if self.on_death is not None:
            self.on_death(self)

    async def kill(self, why: str = "killed") -> None:
        """Kill the process now (SIGKILL): its tasks stop where they are."""
        self.die(why)
        await self.reaped()

    async def reaped(self) -> None:
        """Wait until a dead process's tasks ended and its locks are free."""
        if self._reaped is not None:
            await self._reaped

    async def _reap(self) -> None:
        me = asyncio.current_task()
        tasks = [t for t in self.tasks if t is not me]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=60)
        for t in tasks:
            if t.done() and not t.cancelled():
                t.exception()  # retrieved: a dead process's errors are not news
        self.locks.free_all()
        with contextlib.suppress(Exception):  # a half-closed connection of a dead process: nothing to keep
            self.inner.close()
        assert self._reaped is not None
        if not self._reaped.done():
            self._reaped.set_result(None)

    async def close(self) -> None:
        """End a live process at the end of a scenario (its worker stopped first)."""
        if self.dead:
            await self.reaped()
            return
        if self.worker is not None:
            await self.stop_worker()
        await self.kill("closed")


def task_factory(
    loop: asyncio.AbstractEventLoop, coro: Any, context: contextvars.Context | None = None
) -> Any:
    """The event loop's task factory: a task created while a process is current belongs to it."""
    task = asyncio.Task(coro, loop=loop, context=context)
    proc = (context or contextvars.copy_context()).get(CURRENT)
    if proc is not None:
        proc.tasks.add(task)
        task.add_done_callback(proc.tasks.discard)
    return task
