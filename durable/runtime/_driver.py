"""Driving runs in the background of a process: one task per run, watched for cancellation.

The runtime's state for one world object (its control store, the guards of
the runs driven through it, its default driver, the workers' wake-ups)
lives on the world (``world.runtime_state``), never in a module
global: two worlds in one process share nothing.

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
from collections.abc import Callable, Iterable
from typing import Any

from .._clock import poll_wait
from .._logging import DEBUG, INFO, note
from ..engine import (
    DriveOptions,
    Recorded,
    Spec,
    WorldCore,
    budget_of,
    count_run,
    drive,
    first_started,
    validate_input,
    workflow_spec,
)
from ..errors import ConfigurationError, FencedError, RunCancelled, RunCancelledError, RunInterrupted
from ..security import open_control_input, seal_control_input
from ..store import ControlRecord, MemoryControl, RunControl, SqliteControl
from ._guard import RunGuard, WorkerStopping
from ._outcome import (
    BLOCKED,
    FAILED,
    NONDETERMINISM,
    blocked_error,
    blocked_fields,
    blocked_text,
    classify,
    record_failed,
)

log = logging.getLogger("durable.runtime")

WATCH_INTERVAL = 0.05
"""Seconds between two reads of the cancellation requests of the runs a driver drives."""

STOP_GRACE = 30.0
"""Seconds a stopping driver waits for its runs to reach a durable point before cancelling them."""

MAX_RECOVERY_ATTEMPTS = 5
"""Recoveries of one run (drives cut without a recorded outcome) before it is ``blocked``."""

HOST = socket.gethostname()

WAITING = "waiting"
"""A drive's end that left the run to other code (``Driver.on_nondeterminism``): its record waits."""

UNREAD = object()
"""``Driver.spawn`` without the run's ``run.started`` data: the drive reads it."""


class RuntimeState:
    """The runtime's state for one world object.

    Attributes:
        control: The world's control store: the one the world brings (``world.control_store``,
            as a Postgres world does), else ``runtime.db`` beside ``events.db``, or one in memory.
        live: The guards of the runs this world object drives now, by run id.
        known: Workflows started or served through this world object, by recorded name.
        nudges: The wake-up events of the workers serving this world object.
        default: The driver of runs started without a queue, made on first use.
    """

    def __init__(self, world: WorldCore):
        control = world.control_store  # a world's own (Postgres)
        if control is None:
            control = (
                SqliteControl(world.data_dir / "runtime.db")
                if world.data_dir is not None
                else MemoryControl()
            )
            world.control_store = control
        self.control = control
        self.live: dict[str, RunGuard] = {}
        self.known: dict[str, Spec] = {}
        self.nudges: list[asyncio.Event] = []
        self.default: Driver | None = None


def runtime_of(world: WorldCore) -> RuntimeState:
    """The world's runtime state, made on first use."""
    state = world.runtime_state
    if isinstance(state, RuntimeState):
        return state
    made = world.runtime_state = RuntimeState(world)
    return made


def waker(event: asyncio.Event) -> Callable[[], None]:
    """A function that sets ``event`` in the running loop, callable from any thread."""
    loop = asyncio.get_running_loop()

    def wake() -> None:
        loop.call_soon_threadsafe(event.set)

    return wake


def seal_input(
    world: WorldCore, run_id: str, text: str, queue: str | None = None, debounce_key: str | None = None
) -> str:
    """The input's JSON text as the control store keeps it: encrypted under an encrypted world's codec.

    The run id is bound as associated data, so a sealed input moved to
    another run's record does not decrypt; a debounced start's input is
    bound to its queue and debounce key instead (a later start of the burst
    puts it in the record of the first).
    """
    return seal_control_input(world.codec, run_id, text, queue=queue, debounce_key=debounce_key)


def open_input(world: WorldCore, rec: ControlRecord) -> str:
    """The input's JSON text from a control record (see ``seal_input``).

    Raises:
        CodecError: The input is sealed and this world has no codec, or it does not decrypt there.
    """
    return open_control_input(
        world.codec, rec.run_id, rec.input, queue=rec.queue, debounce_key=rec.debounce_key
    )


def keeps_control(world: WorldCore) -> bool:
    """Whether the world keeps control records (a Postgres world always; a data directory once used)."""
    data_dir = world.data_dir
    return world.control_store is not None or (data_dir is not None and (data_dir / "runtime.db").exists())


def control_of(world: WorldCore) -> RunControl:
    """The world's control store, opened on first use (``runtime.db`` beside ``events.db``)."""
    return runtime_of(world).control


def live_guard(world: WorldCore, run_id: str) -> RunGuard | None:
    """The guard of a run driven through this world object now, or ``None``."""
    return runtime_of(world).live.get(run_id)


def owner_name(name: str | None) -> str:
    """A driver's name: the given one, or ``host:pid:random``."""
    return name or f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Driver:
    """Runs driven by one owner in this process's event loop.

    Args:
        world: The world.
        owner: The owner's name, recorded in each claim.
        on_done: Called with the run id when a run's task ends.
        max_recovery_attempts: Recoveries of a run before it is ``blocked`` (a workflow's
            ``@workflow(max_recovery_attempts=...)`` wins).
        on_nondeterminism: Records the end of a drive that met a ``NondeterminismError``
            ``(spec, run_id, error)`` and returns the run's state (``blocked``, or ``waiting``
            when the run was left to the code it was recorded with); ``None``: blocked.
    """

    def __init__(
        self,
        world: WorldCore,
        owner: str,
        on_done: Callable[[str], None] | None = None,
        max_recovery_attempts: int = MAX_RECOVERY_ATTEMPTS,
        on_nondeterminism: Callable[[Spec, str, BaseException], str] | None = None,
    ):
        self.world = world
        self.owner = owner
        self.max_recovery_attempts = max_recovery_attempts
        self.on_nondeterminism = on_nondeterminism
        self._state = runtime_of(world)
        self.control = self._state.control
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.guards: dict[str, RunGuard] = {}
        self.on_done = on_done
        self._watch: asyncio.Task[None] | None = None
        self._ending: list[tuple[str, str, object, asyncio.Future[None]]] = []
        self._coming: set[str] = set()  # spawned runs whose task has not started

    def lock(self, run_id: str) -> object | None:
        """Take the run's lock now, or ``None`` when another driver holds it."""
        return self.world.locks.try_acquire(f"run:{run_id}")

    def spawn(
        self,
        spec: Spec,
        rec: ControlRecord,
        lock: object,
        started: Any = UNREAD,
        opened: tuple[int, Recorded] | None = None,
    ) -> asyncio.Task[None]:
        """Drive the run in a task of its own; the task releases ``lock`` when it ends.

        ``started``: the run's ``run.started`` data when the caller read it (``None``: not started).
        ``opened``: its fencing token and log when the caller fenced and read it (``open_run``).
        """
        rid = rec.run_id
        guard = RunGuard(rid)
        if rec.cancel_reason is not None:  # asked while nobody drove it
            guard.cancel(rec.cancel_reason)
        self.guards[rid] = guard
        self._state.live[rid] = guard
        self.world.commits.coming += 1  # the runs claimed together group their commits from their first
        task = asyncio.get_running_loop().create_task(
            self._drive(spec, rec, lock, guard, started, opened), name=f"durable:{rid}"
        )
        task.add_done_callback(lambda _: self._arrived(rid))
        self._coming.add(rid)
        self.tasks[rid] = task
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._watch_loop())
        return task

    async def _drive(
        self,
        spec: Spec,
        rec: ControlRecord,
        lock: object,
        guard: RunGuard,
        started: Any,
        opened: tuple[int, Recorded] | None,
    ) -> None:
        world, rid = self.world, rec.run_id
        self._arrived(rid)
        state: str | None = "done"
        # ``drives`` counts the drives since the run's last clean stop: above 1, the last was cut
        # (its driver died), which is news; a first drive its claim or its start says already.
        level = INFO if rec.drives > 1 else DEBUG
        note(level, rid, None, "%s drives run %s (drive %d)", self.owner, rid, rec.drives, logger=log)
        try:
            if started is UNREAD:
                started = first_started(world, rid)  # the first row, not the whole log
            recorded = started
            value = recorded.get("input") if recorded is not None else json.loads(open_input(world, rec))
            models = recorded.get("models", {}) if recorded is not None else json.loads(rec.models)
            checked = validate_input(spec, value, rid, recorded=recorded is not None)
            await drive(
                spec,
                value,
                world,
                run_id=rid,
                models=models,
                retry_failed=rec.resume == "failed",
                budget=None if recorded is not None else budget_of(rec.budget),
                options=DriveOptions(
                    guard=guard,
                    deadline=rec.deadline,
                    lock_held=True,
                    resume_cancelled=rec.resume == "cancelled",
                    traceparent=rec.traceparent,
                    opened=opened,
                    checked=checked,
                ),
            )
        except (RunCancelled, RunCancelledError):
            state = "cancelled"
        except RunInterrupted:
            pass
        except WorkerStopping:
            state = None  # left claimed: resumable by the next worker, and this drive is not counted
            with contextlib.suppress(Exception):
                self.control.uncount(rid)
        except (FencedError, asyncio.CancelledError):
            state = None  # left claimed: resumable by the next worker
        except Exception as exc:
            state = self._settle(spec, rid, exc)
        finally:
            try:
                if state is None or state in (BLOCKED, WAITING):
                    self.world.locks.release(lock)
                else:
                    await self._end(rid, state, lock)
            finally:
                self._forget(rid, guard)

    def _arrived(self, rid: str) -> None:
        """The run's task started (or ended before it could): it is no longer coming."""
        if rid in self._coming:
            self._coming.discard(rid)
            self.world.commits.coming -= 1

    def _settle(self, spec: Spec, rid: str, exc: Exception) -> str | None:
        """Record the outcome of a drive that raised ``exc``: ``done``, ``blocked``, ``waiting`` or ``None``.

        ``waiting``: left to the code the run was recorded with; ``None``: the drive was cut.

        A cut drive leaves the run claimed and counted: the next recovery
        tries again after its backoff, and ``max_recovery_attempts`` bounds it.
        """
        world = self.world
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        try:
            if recorded_end(world, rid):
                return "done"
            kind, reason = classify(exc)
            if kind == FAILED:
                recorded = record_failed(world, rid, exc)
                if recorded:
                    rec = self.control.get(rid)
                    count_run("failed", rec.workflow if rec is not None else "")
                if recorded or recorded_end(world, rid):
                    log.warning("run %s failed: %s: %s", rid, type(exc).__name__, first)
                    return "done"
            elif kind == BLOCKED and reason == NONDETERMINISM and self.on_nondeterminism is not None:
                return self.on_nondeterminism(spec, rid, exc)
            elif kind == BLOCKED:
                assert reason is not None
                block_run(world, rid, reason, exc)
                return BLOCKED
        except Exception as again:  # the store cannot take the outcome now: the drive counts as cut
            log.warning("run %s stopped (%s) and its outcome could not be recorded: %s", rid, first, again)
            return None
        log.warning("run %s stopped without a recorded outcome (%s); it will be recovered", rid, first)
        return None

    def _forget(self, rid: str, guard: RunGuard) -> None:
        """Drop a run whose task ends from this driver (and tell the owner)."""
        self.tasks.pop(rid, None)
        self.guards.pop(rid, None)
        if self._state.live.get(rid) is guard:
            del self._state.live[rid]
        if self.on_done is not None:
            self.on_done(rid)

    async def _end(self, rid: str, state: str, lock: object) -> None:
        """Record the run's end in the control store, then give its lock back.

        The runs that end in one turn of the event loop share one control
        transaction (a worker driving a hundred short runs otherwise spends
        a write transaction per run); the record is ended before the lock is
        released, so no other worker takes a finished run for an orphan.
        """
        fut = asyncio.get_running_loop().create_future()
        self._ending.append((rid, state, lock, fut))
        if len(self._ending) == 1:
            asyncio.get_running_loop().call_soon(self._flush_ends)
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            self._flush_ends()  # the loop may not turn again: end the record and free the lock now
            raise

    def _flush_ends(self) -> None:
        batch, self._ending = self._ending, []
        if not batch:
            return
        try:
            with contextlib.suppress(Exception):  # a busy store: the next worker finds the run finished
                self.control.finish_many([(rid, state) for rid, state, _, _ in batch])
        finally:
            for _, _, lock, fut in batch:
                self.world.locks.release(lock)
                if not fut.done():
                    fut.set_result(None)

    async def _watch_loop(self) -> None:
        """Read the cancellation requests of the driven runs while there are any."""
        rung = asyncio.Event()
        stop_listening = self.control.subscribe(waker(rung), ("cancel:",))  # cancellation requests only
        try:
            while self.guards:
                await poll_wait(rung, WATCH_INTERVAL)
                rung.clear()
                try:
                    requests = self.control.cancel_requests(list(self.guards))
                except Exception:  # a busy store: the next round reads again
                    continue
                for rid, reason in requests.items():
                    guard = self.guards.get(rid)
                    if guard is not None:
                        guard.cancel(reason)
        finally:
            if stop_listening is not None:
                stop_listening()

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


def block_run(
    world: WorldCore,
    run_id: str,
    reason: str,
    exc: BaseException | None,
    workflow: str = "",
    *,
    code: str | None = None,
) -> None:
    """Record that the run waits for a decision (``blocked`` with ``reason``), with its one warning.

    The driver that held the run's lock records it, a worker's or ``run_workflow``'s. A
    run driven by ``run_workflow`` has no control record until it needs one: it is
    made here (claimed by nobody, then blocked), for ``workflow``. ``code``: as
    ``blocked_fields`` takes it (the code a ``nondeterminism`` run was recorded with).
    """
    ctl = runtime_of(world).control
    if ctl.get(run_id) is None:
        ctl.adopt(run_id, workflow, owner="", pid=0, host="", now=world.clock())
    ctl.block(run_id, blocked_text(world, run_id, reason, exc, code=code))
    say_blocked(world, run_id, reason, exc, code=code)


def say_blocked(
    world: WorldCore, run_id: str, reason: str, exc: BaseException | None, *, code: str | None = None
) -> None:
    """The one warning a run gets when it becomes ``blocked``: why, and the commands that unblock it.

    ``code``: as ``blocked_fields`` takes it (the code a ``nondeterminism`` run was recorded with).
    """
    data = blocked_fields(run_id, reason, exc, code=code)
    rec = runtime_of(world).control.get(run_id)
    count_run("blocked", rec.workflow if rec is not None else "")
    log.warning("%s", blocked_error(world, run_id, data, rec.queue if rec is not None else None))


def recorded_end(world: WorldCore, run_id: str) -> bool:
    """Whether the run's log records its end (neither running nor waiting at an interrupt).

    A drive that cancels a waiting run has no end yet when it raises.
    """
    info = world.log.info(run_id)
    return info is not None and info.status not in ("running", "interrupted")


def default_driver(world: WorldCore) -> Driver:
    """The driver of the runs this process starts without a queue (one per world object)."""
    state = runtime_of(world)
    if state.default is None:
        state.default = Driver(world, owner_name(None))
    return state.default


def record_for(world: WorldCore, run_id: str) -> ControlRecord | None:
    """The run's control record (``None`` when it has none)."""
    return control_of(world).get(run_id)


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


def workflow_map(workflows: Iterable[Any]) -> dict[str, Spec]:
    """Recorded name to spec; two workflows with one name are refused."""
    out: dict[str, Spec] = {}
    for wf in workflows:
        spec = workflow_spec(wf)
        other = out.get(spec.name)
        if other is not None and other.fn is not spec.fn:
            raise ConfigurationError(
                f"two workflows are named {spec.name!r} ({other.qualname} and {spec.qualname}); "
                "a worker knows runs by their recorded name. Give one of them @workflow(name=...)."
            )
        out[spec.name] = spec
    return out
