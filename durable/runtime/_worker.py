"""``Worker``: claims queued runs under their limits and recovers every run whose driver died."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

from .._clock import VIRTUAL, due_at, poll_wait
from .._logging import INFO, note
from ..engine import WorldCore, check_recovery_attempts, open_run, record_queue_wait
from ..errors import ConfigurationError
from ..store import RunControl
from ._driver import HOST, MAX_RECOVERY_ATTEMPTS, Driver, owner_name, runtime_of, waker, workflow_map
from ._live_workers import register, unregister
from ._outbox import OutboxDispatcher
from ._queue import Queue
from ._schedules import Schedule, Schedules, next_tick, schedule_pass
from ._serving import CodeMatch, leave_waiting
from ._start import recovery_pass

log = logging.getLogger("durable.runtime")

T = TypeVar("T")

POLL = 0.001
"""Seconds between two cheap checks for a change by another process, when the store cannot announce one."""

POLL_ANNOUNCED = 0.1
"""Seconds between two checks when the control store announces changes (a missed ring waits this long)."""

CLAIM_EVERY = 0.1
"""Seconds after which a worker tries to claim even when nothing changed (rate-limit windows)."""

CLAIM_GATHER = 0.002
"""Seconds a worker that still drives other runs waits after a run's end before it claims again.

The slots freed meanwhile are refilled by one claim, and the runs claimed
together start, commit and end together (one statement each on Postgres)
instead of one claim and one small group per run that ends. Work announced
meanwhile waits for that claim too; the end of a worker's last run is
followed by a claim at once.
"""

RECOVER_EVERY = 0.25
"""Seconds between two recovery passes."""

SCHEDULE_EVERY = 0.1
"""Seconds between two looks at the world's schedules for due ticks."""

OUTBOX_EVERY = 0.01
"""Seconds between two passes of the outbox dispatcher (which is also the reconciler)."""


class Worker:
    """Drives the runs of its queues, recovers runs whose driver died, and dispatches the outbox.

    Use it as ``async with Worker(...) as worker:`` inside an application,
    ``await worker.run()`` as a process of its own (SIGTERM and Ctrl-C stop
    it), or ``little worker MODULE:ATTR`` from the shell. A stop stops
    claiming, lets in-flight runs reach their next durable point and leaves
    them resumable: the next worker drives them on.

    Args:
        world: The world whose runs it drives.
        workflows: The ``@workflow`` functions it knows, by their recorded names.
        queues: The ``Queue`` objects (or names) it claims from.
        concurrency: Runs this worker drives at once, every queue and recovery together.
        schedules: ``Schedule`` objects: the worker stores them in the world
            (keeping a stored one's pause and last tick) and starts their
            ticks; it also starts the ticks of schedules created at run time
            (``world.schedules``) whose workflow it knows.
        name: The worker's name in claims (default ``host:pid:random``).
        max_recovery_attempts: Recoveries of one run (drives cut because a worker died)
            before the run is ``blocked`` with reason ``recovery_exhausted``; a workflow's
            ``@workflow(max_recovery_attempts=...)`` wins. Recoveries of one run back off:
            the first at once, then 1, 2, 4 ... up to 60 seconds.

    Raises:
        ConfigurationError: Two workflows share a name, or an option is invalid.
    """

    def __init__(
        self,
        world: WorldCore,
        *,
        workflows: Iterable[Any],
        queues: Iterable[Queue | str] = (),
        concurrency: int = 100,
        schedules: Iterable[Any] = (),
        name: str | None = None,
        max_recovery_attempts: int = MAX_RECOVERY_ATTEMPTS,
    ):
        check_recovery_attempts("Worker max_recovery_attempts", max_recovery_attempts)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"Worker concurrency must be an int >= 1, not {concurrency!r}.")
        workflows, queues, schedules = list(workflows), list(queues), list(schedules)
        # Every option as given, so that ``on()`` makes the same worker on another world.
        self._options: dict[str, Any] = {
            "workflows": workflows,
            "queues": queues,
            "concurrency": concurrency,
            "schedules": schedules,
            "name": name,
            "max_recovery_attempts": max_recovery_attempts,
        }
        self.schedules = list(schedules)
        for s in self.schedules:
            if not isinstance(s, Schedule):
                raise ConfigurationError(f"Worker(schedules=) takes durable.Schedule objects, not {s!r}.")
        self.world = world
        self.specs = workflow_map([*workflows, *(s.wf for s in self.schedules)])
        self.queues = [q if isinstance(q, Queue) else Queue(q) for q in queues]
        self.concurrency = concurrency
        self.name = owner_name(name)
        self.code = CodeMatch(world, self.name)
        self.driver = Driver(
            world,
            self.name,
            on_done=self._done,
            max_recovery_attempts=max_recovery_attempts,
            on_nondeterminism=self.code.settle_divergence,
        )
        self.outbox = OutboxDispatcher(world, self.name)
        self._registered: object | None = None  # its lock while it is registered (``_live_workers``)
        self._queue_of: dict[str, str | None] = {}
        self._warned: set[str] = set()
        self._said: set[str] = set()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._gather: asyncio.TimerHandle | None = None  # the claim after the ends of a moment
        runtime_of(world).known.update(self.specs)

    def on(self, world: WorldCore, **changes: Any) -> Worker:
        """A worker configured as this one, on ``world``: what ``little worker MODULE:ATTR`` serves.

        Every option this worker was made with carries over (workflows,
        queues, concurrency, schedules, name, max_recovery_attempts), but for
        those ``changes`` names.

        Args:
            world: The world the new worker drives.
            **changes: Options of ``Worker`` to give other values.

        Returns:
            A new worker; this one is left as it is.

        Raises:
            TypeError: ``changes`` names no option of ``Worker``.
        """
        unknown = changes.keys() - self._options.keys()
        if unknown:
            raise TypeError(f"Worker has no option {sorted(unknown)[0]!r}")
        return Worker(world, **{**self._options, **changes})

    # -- lifecycle ---------------------------------------------------------------

    async def __aenter__(self) -> Worker:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start claiming and recovering in the background of this event loop."""
        if self._task is None:
            for s in self.schedules:
                Schedules(self.world).create(s)
            # Registered before it serves: a worker whose replay of a run diverges asks
            # whether one of the run's own code is alive (``_live_workers``).
            self._registered = self._duty(
                "registration",
                lambda: register(self.world, self.name, self.specs.values(), [q.name for q in self.queues]),
            )
            self._wake = asyncio.Event()
            runtime_of(self.world).nudges.append(self._wake)
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"worker:{self.name}")

    async def run(self, *, announce: bool = True) -> None:
        """Serve until SIGTERM or SIGINT (or ``stop()``), then stop gracefully.

        Args:
            announce: Write a line to stderr when the worker starts serving (its
                name, workflows and queues) and one when it stopped, so that a
                plain script says what it does without any logging configured.
                ``little worker``, which prints its own, passes ``False``.
        """
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
        await self.start()
        assert self._task is not None
        if announce:
            queues = ", ".join(q.name for q in self.queues) or "(none: recovery only)"
            self._say(
                f"workflows {', '.join(sorted(self.specs))}; queues {queues}; serving until SIGTERM or Ctrl-C"
            )
        try:
            waiter = asyncio.ensure_future(stop.wait())
            await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self.stop()
            if announce:
                self._say("stopped")

    def _say(self, text: str) -> None:
        print(f"durable worker {self.name}: {text}", file=sys.stderr, flush=True)

    async def stop(self) -> None:
        """Stop claiming, let in-flight runs reach a durable point, and leave them resumable."""
        self._stopping = True
        if self._gather is not None:
            self._gather.cancel()
            self._gather = None
        if self._wake is not None:
            self._wake.set()
            with contextlib.suppress(ValueError):
                runtime_of(self.world).nudges.remove(self._wake)
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.driver.stop()
        await self.outbox.stop()
        lock, self._registered = self._registered, None
        if lock is not None:
            self._duty("registration", lambda: unregister(self.world, self.name, lock))

    @property
    def in_flight(self) -> int:
        """How many runs this worker drives now."""
        return len(self.driver.tasks)

    # -- the loop --------------------------------------------------------------

    def _done(self, run_id: str) -> None:
        """A run's task ended: claim at once when no other run is driven, else after ``CLAIM_GATHER``."""
        self._queue_of.pop(run_id, None)
        wake = self._wake
        if wake is None:
            return
        if not self.driver.tasks or self._stopping:
            if self._gather is not None:  # the last run ended inside a gather: claim now
                self._gather.cancel()
                self._gather = None
            wake.set()
        elif self._gather is None:
            self._gather = asyncio.get_running_loop().call_later(CLAIM_GATHER, self._gathered)

    def _gathered(self) -> None:
        self._gather = None
        if self._wake is not None:
            self._wake.set()

    async def _loop(self) -> None:
        ctl = self.driver.control
        loop = asyncio.get_running_loop()
        wake = self._wake
        assert wake is not None
        # Only new work on a queue (and a freed slot, under a global limit) wakes the loop to
        # claim: every run's end and cancellation heard would otherwise cost a claim.
        limited = any(q.concurrency is not None or q.partition_concurrency is not None for q in self.queues)
        stop_listening = ctl.subscribe(waker(wake), ("queue:", "free:") if limited else ("queue:",))
        announced = stop_listening is not None
        poll = POLL_ANNOUNCED if announced else POLL
        try:
            await self._serve(ctl, loop, poll, announced)
        finally:
            if stop_listening is not None:
                stop_listening()

    async def _serve(
        self, ctl: RunControl, loop: asyncio.AbstractEventLoop, poll: float, announced: bool
    ) -> None:
        # Under leases renewed every `heartbeat` s, a dead driver's runs free up no sooner than a
        # lease after its last renewal: a pass every half heartbeat keeps takeover within
        # lease + heartbeat, at a fraction of the statements (each pass reads 4-5 tables).
        beat = getattr(self.world.locks, "heartbeat", None)
        recover_every = RECOVER_EVERY if beat is None else max(RECOVER_EVERY, beat / 2)
        next_recovery = 0.0
        next_claim = 0.0
        next_outbox = 0.0
        next_schedule = 0.0
        version = -1
        assert self._wake is not None
        while not self._stopping:
            now = loop.time()
            woken = self._wake.is_set()
            self._wake.clear()
            # Each duty fails on its own: a store that cannot serve one (a world without an
            # outbox, a busy file) never keeps the worker from the others.
            if now >= next_schedule:
                if self._duty("schedules", lambda: schedule_pass(self.world, self.specs, self.world.clock())):
                    next_recovery = next_claim = 0.0  # drive or claim the new ticks now
                next_schedule = now + SCHEDULE_EVERY
            if now >= next_recovery:
                for h in (
                    self._duty(
                        "recovery", lambda: recovery_pass(self.driver, self.specs, self._warned, self.code)
                    )
                    or ()
                ):
                    self._queue_of[h.run_id] = None
                next_recovery = now + recover_every
            if now >= next_outbox and self.outbox.tools() and self.world.keeps_outbox():
                self._duty("outbox", self.outbox.dispatch_pass)  # at start too: entries whose dispatcher died
                next_outbox = now + OUTBOX_EVERY
            seen = version if announced else self._duty("claims", ctl.version)  # announced: the wake says
            # A gather in progress (see ``CLAIM_GATHER``) holds every claim until it ends: a doorbell
            # that cannot tell a run's end from new work would otherwise claim at each end.
            if self.queues and self._gather is None and (seen != version or woken or now >= next_claim):
                version = -1 if seen is None else seen
                self._duty("claims", self._claim)
                next_claim = now + CLAIM_EVERY
            upcoming = self._next_tick()
            tick = None if upcoming is None else due_at(upcoming)
            try:
                await poll_wait(self._wake, min(poll, max(next_recovery - loop.time(), 0.0)))
            finally:
                if tick is not None:
                    tick.cancel()

    def _next_tick(self) -> float | None:
        """In virtual time, the wall time of the next schedule tick this worker starts (else ``None``)."""
        if VIRTUAL.get() is None:
            return None
        return self._duty("schedules", lambda: next_tick(self.world, self.specs, self.world.clock()))

    def _duty(self, what: str, fn: Callable[[], T]) -> T | None:
        """Do one of the loop's duties; a failure is said (once per message) and tried again later."""
        try:
            return fn()
        except Exception as exc:  # a busy store or a damaged record: say so, try again
            said = f"{what}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            if said not in self._said:
                self._said.add(said)
                log.warning("worker %s: %s", self.name, said)
            return None

    def _claim(self) -> None:
        ctl, world = self.driver.control, self.world
        for q in self.queues:
            room = self.concurrency - len(self.driver.tasks)
            if room <= 0:
                return
            if q.worker_concurrency is not None:
                mine = sum(1 for name in self._queue_of.values() if name == q.name)
                room = min(room, q.worker_concurrency - mine)
            if room <= 0:
                continue
            claimed = ctl.claim(
                q.limits(),
                owner=self.name,
                pid=os.getpid(),
                host=HOST,
                room=room,
                now=world.clock(),
                workflows=set(self.specs),
            )
            for rec in claimed:
                lock = self.driver.lock(rec.run_id)
                if lock is None:
                    continue  # another driver took it over already
                spec = self.specs[rec.workflow]
                try:
                    # Fenced and read once, for the code check and for the drive.
                    opened = open_run(world, rec.run_id)
                    started = opened[1].started
                    changes = self.code.changes(spec, rec.run_id, started, opened[1])
                    if changes:  # a resumed run this code cannot replay: no slot, no drive
                        manifest = None if started is None else started.get("manifest_hash")
                        waits = self.code.waiting(spec, rec, manifest, changes, opened[1])
                        leave_waiting(self.code, rec, waits, counted=True)
                except BaseException:
                    world.locks.release(lock)
                    raise
                if changes:
                    world.locks.release(lock)
                    continue
                self._queue_of[rec.run_id] = q.name
                record_queue_wait(q.name, world.clock() - rec.created_at)
                self.driver.spawn(spec, rec, lock, started, opened)
                note(
                    INFO,
                    rec.run_id,
                    None,
                    "worker %s claimed run %s from queue %r",
                    self.name,
                    rec.run_id,
                    q.name,
                    logger=log,
                    worker=self.name,
                    queue=q.name,
                )
