"""``RunHandle``: a run seen from any process, and ``durable.handle(run_id, world=...)``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Generator, Iterable
from typing import Any

from .._clock import due_at, monotonic, poll_wait, wall
from ..engine import (
    Spec,
    Usage,
    WorldCore,
    checked_run_id,
    completed_output,
    outcome_of,
    rebuild_from,
    recover_log,
    run_usage,
    undo_pending,
)
from ..errors import ConfigurationError, RunCancelledError, RunInterrupted, RunNotFoundError, RunTimeoutError
from ..events import RUN_COMPLETED, RUN_INTERRUPTED
from ..ops import record_cancelled
from ._driver import HOST, control_of, default_driver, live_guard, runtime_of, waker, workflow_map
from ._outcome import blocked_data, blocked_error
from ._status import RunStatus, run_status

_POLL_MIN = 0.0005
_POLL_MAX = 0.02
_POLL_ANNOUNCED = 0.25
"""The longest wait between two reads of a run's status when the control store announces changes."""


class RunHandle:
    """A run started with ``start_workflow`` (or found with ``durable.handle``), from any process.

    ``await`` on the handle itself gives the handle back, so
    ``await start_workflow(...)`` and ``start_workflow(...)`` both work.

    Attributes:
        run_id: The run's id.
        world: The world it lives in.
    """

    __slots__ = ("_spec", "run_id", "world")

    def __init__(self, run_id: str, world: WorldCore, spec: Spec | None = None):
        self.run_id = run_id
        self.world = world
        self._spec = spec

    def __await__(self) -> Generator[Any, None, RunHandle]:
        if False:  # pragma: no cover - makes this a generator
            yield
        return self

    async def status(self) -> str:
        """The run's status, one of ``STATUSES`` (``blocked``: it waits for a decision)."""
        return run_status(self.world, self.run_id).status

    async def status_detail(self) -> RunStatus:
        """The status with its reason, error, the commands that fix it, its queue and driver."""
        return run_status(self.world, self.run_id)

    async def usage(self) -> Usage:
        """What the run and the runs it started spent on model calls, read from their logs.

        ``calls``, ``input_tokens`` and ``output_tokens`` count each executed
        model call once (replays add nothing); ``cost`` prices them with the
        run's budget's ``prices`` (0 without a budget).
        """
        return run_usage(self.world, self.run_id)

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to finish; its output, or its error re-raised.

        Args:
            timeout: Seconds to wait (``None``: as long as it takes). The run is not affected.

        Returns:
            The output, rebuilt as the workflow's annotated type when this
            handle knows the workflow (otherwise as the log's JSON).

        Raises:
            RunCancelledError: The run was cancelled.
            RunBlockedError: The run is blocked: it waits for a decision (``reason``,
                ``cause``, ``fixes``).
            RunInterrupted: The run waits for an answer (``handle.answer(value)``).
            RunTimeoutError: ``timeout`` passed first.
            Exception: The run's recorded failure, rebuilt.
        """
        give_up = None if timeout is None else monotonic() + timeout
        task = default_driver(self.world).tasks.get(self.run_id)
        if task is not None:
            await asyncio.wait([task], timeout=timeout)
        rung = asyncio.Event()
        # Only this run's announcements wake the wait: with many runs in flight,
        # every other run's claim or finish would cost a status read here.
        about = (f"run:{self.run_id}", f"cancel:{self.run_id}")
        ctl = control_of(self.world)
        stop_listening = ctl.subscribe(waker(rung), about)
        heard = getattr(ctl, "heard_lately", None)  # a store that remembers announcements (Postgres)
        most = _POLL_MAX if stop_listening is None else _POLL_ANNOUNCED
        # Announced: the store rings at every change of this run, and the poll only
        # bounds a lost ring; polling faster would cost a status read per poll.
        delay = _POLL_MIN if stop_listening is None else most
        due = None if timeout is None else due_at(wall() + timeout)  # virtual time stops there
        try:
            # Most wake-ups find the run's end, and so does a first look at a run whose drive here ended
            # or whose change was announced: a completed run needs no status read, only its
            # log's last row (one query). A first look at another run reads its status first.
            woken = (task is not None and task.done()) or (heard is not None and heard(f"run:{self.run_id}"))
            while True:
                if woken:
                    done, output = completed_output(self.world.log, self.run_id)
                    if done:
                        return self._spec.rebuild(output) if self._spec is not None else output
                st = run_status(self.world, self.run_id)
                if st.status not in ("enqueued", "running"):
                    return self._outcome(st)
                left = None if give_up is None else give_up - monotonic()
                if left is not None and left <= 0:
                    raise RunTimeoutError(
                        f"run {self.run_id!r} did not finish within {timeout} s; it goes on "
                        "(call result() again to keep waiting).",
                        run_id=self.run_id,
                    )
                await poll_wait(rung, delay if left is None else min(delay, left))
                woken = rung.is_set()
                rung.clear()
                delay = min(delay * 1.5, most)
        finally:
            if due is not None:
                due.cancel()
            if stop_listening is not None:
                stop_listening()

    def _outcome(self, st: RunStatus) -> Any:
        rid = self.run_id
        if st.status == "cancelled":
            raise RunCancelledError(
                f"run {rid!r} was cancelled ({st.reason or 'requested'}); continue it with "
                f"durable.resume_run({rid!r}, world=...) or `little resume {rid}`.",
                run_id=rid,
                reason=st.reason or "requested",
            )
        if st.status == "blocked":
            ctl = control_of(self.world).get(rid)
            raise blocked_error(
                self.world,
                rid,
                blocked_data(self.world, rid, ctl.blocked if ctl is not None else None),
                ctl.queue if ctl is not None else None,
            )
        terminal = outcome_of(self.world.log, rid)
        if terminal is None:  # failed before its first event (a control record only)
            raise RunNotFoundError(f"run {rid!r} ended without writing its log.", run_id=rid)
        kind, data = terminal
        if kind == RUN_COMPLETED:
            return self._spec.rebuild(data["output"]) if self._spec is not None else data["output"]
        if kind == RUN_INTERRUPTED:
            raise RunInterrupted(
                f"run {rid!r} is waiting at {data['path']!r} for an answer; answer it with "
                f"durable.handle({rid!r}, world=...).answer(value) or `little answer {rid} JSON`.",
                run_id=rid,
                value=data.get("value"),
                path=data["path"],
            )
        raise rebuild_from(data, run_id=rid, path=data.get("path"))

    async def cancel(self) -> None:
        """Ask the run to stop; see ``cancel_run``."""
        cancel_run(self.world, self.run_id)

    async def resolve(
        self,
        key: str,
        *,
        happened: bool,
        result: Any = None,
        workflows: Iterable[Any] = (),
        by: str | None = None,
    ) -> None:
        """Decide an unknown commit of a blocked run: did the tool call at ``key`` happen?

        ``happened=True`` records ``result`` (checked against the tool's return
        type) as the call's receipt, so the run goes on as if the call had
        returned it; ``happened=False`` lets the call execute again with the
        same idempotency key. A compensation (``compensate:<key>``) that was cut
        mid-call, failed for good or was not begun is decided the same way:
        ``happened=True`` takes the undo as done (by hand, say), and the run
        goes on with the older compensations; ``happened=False`` calls it again.
        The decision is recorded in the log (``run.resolved``, with ``by`` and
        when), and the run continues: back on its queue, or in the background
        of this process when it knows the workflow (else a worker that knows it
        drives it).

        Args:
            key: The key the ``UnknownCommitError`` or ``CompensationFailedError`` printed
                (``status_detail().error["key"]``).
            happened: Whether the call took place in the external system.
            result: With ``happened=True``: what the tool returned, as JSON data.
            workflows: The ``@workflow`` functions, when this process did not start or serve the run.
            by: Who decided (default ``user@host``).

        Raises:
            ConfigurationError: ``key`` is not an unconfirmed call of the run, the run is
                driven right now, or ``result`` does not fit the tool's return type.
        """
        from ._resolve import resolve_commit

        spec = resolve_commit(
            self.world, self.run_id, key, happened=happened, result=result, workflows=workflows, by=by
        )
        self._spec = self._spec or spec

    async def answer(self, value: Any, *, workflows: Iterable[Any] = (), by: str | None = None) -> None:
        """Answer the interrupt this run waits at, without the run's input; the run continues.

        A queued run goes back on its queue; another continues in the
        background of this process when it knows the workflow (else a worker
        that knows it drives it). The answer is recorded in the log with who
        gave it and when.

        Args:
            value: The answer (JSON data); ``durable.interrupt`` returns it in the run.
            workflows: The ``@workflow`` functions, when this process did not start or serve the run.
            by: Who answered (default ``user@host``).

        Raises:
            ConfigurationError: The run waits for no answer, or is driven right now.
        """
        from ._resolve import answer_run

        spec = answer_run(self.world, self.run_id, value, workflows=workflows, by=by)
        self._spec = self._spec or spec

    # -- talking to the run (section "talking to runs" of the docs) -------------

    async def send(self, value: Any, topic: str | None = None) -> None:
        """Send ``value`` to the run (its ``durable.recv(topic)`` returns it); see ``durable.send``."""
        from ._messages import send

        await send(self.run_id, value, topic=topic, world=self.world)

    async def get_event(self, key: str, timeout: float | None = None) -> Any:
        """The last value the run set for its event ``key`` (``durable.set_event``).

        Waits for the first value when none is set yet.

        Args:
            key: The event's name.
            timeout: Seconds to wait at most (``None``: until it is set or the run ends).

        Returns:
            The value as JSON data, or ``None`` when ``timeout`` passed first or the
            run ended without setting it.
        """
        from ._messages import get_event

        return await get_event(self.world, self.run_id, key, timeout)

    def read_stream(self, key: str, start: int = 0) -> AsyncIterator[Any]:
        """Every value of the run's stream ``key``, in order, live (``async for``).

        The iteration ends when the run closes the stream (``durable.close_stream``)
        or the run completes, fails or is cancelled. A reader that reconnects
        passes the number of values it already has as ``start``.

        Args:
            key: The stream's name.
            start: Skip the first ``start`` values.

        Raises:
            ConfigurationError: ``start`` is not an int >= 0.
        """
        from ._messages import read_stream

        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ConfigurationError(f"read_stream() takes start= as an offset >= 0, not {start!r}.")

        return read_stream(self.world, self.run_id, key, start)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id!r}>"


def cancel_run(
    world: WorldCore, run_id: str, reason: str = "requested", *, workflows: Iterable[Any] = ()
) -> str:
    """Record a cancellation outside the run's log; return the run's status afterwards.

    An enqueued run becomes ``cancelled`` at once and never starts. A running
    run stops at its next durable call or wait (at once when this process
    drives it, within a second from another process); so do its child runs.
    A run that nobody drives (it waits at an interrupt, or its driver died)
    is closed as ``cancelled`` by this call, unless it has confirmed calls to
    undo (``compensate=``): then this process drives it to its cancellation
    in the background when it knows the workflow (it started or serves it, or
    ``workflows`` names it), and otherwise leaves it as it is. A finished run
    is left as it is.

    Raises:
        RunNotFoundError: The world has no such run.
    """
    if workflows:
        runtime_of(world).known.update(workflow_map(workflows))
    st = run_status(world, run_id)
    if st.status in ("completed", "failed", "cancelled"):
        return st.status
    ctl = control_of(world)
    ctl.request_cancel(run_id, reason, world.clock())
    children = [c.run_id for c in world.log.runs(status="running") if c.parent_run_id == run_id]
    for child in children:
        ctl.request_cancel(child, reason, world.clock())
    guard = live_guard(world, run_id)
    if guard is not None:
        guard.cancel(reason)
    elif st.status in ("interrupted", "running", "blocked"):
        for rid in [*children, run_id]:
            _close_undriven(world, rid, reason)
    return run_status(world, run_id).status


def _close_undriven(world: WorldCore, run_id: str, reason: str) -> None:
    """Cancel a run that no live process drives (it waits at an interrupt, or its driver died).

    A run with confirmed calls to undo (``compensate=``) is not closed here:
    its compensations need its code. This process drives it to its
    cancellation when it knows the workflow; otherwise the run is left as
    it is, for a process that knows it to cancel (a run whose driver died
    keeps the request, and the worker that recovers it undoes and ends it).
    """
    lock = world.locks.try_acquire(f"run:{run_id}")
    if lock is None:
        return  # a live driver: it sees the request at its next durable call
    handed = False
    try:
        if undo_pending(recover_log(world.log, run_id)):
            handed = _drive_to_cancel(world, run_id, reason, lock)
            return
        if record_cancelled(world, run_id, reason):
            control_of(world).finish(run_id, "cancelled")
    finally:
        if not handed:
            world.locks.release(lock)


def _drive_to_cancel(world: WorldCore, run_id: str, reason: str, lock: object) -> bool:
    """Drive the run here, cancelled from its start, when this process can; whether it took ``lock``.

    The drive replays the confirmed calls, meets the cancellation at the
    first call the log does not hold (an unanswered interrupt included),
    runs the compensations and records ``run.cancelled``. The run's record
    says who drives it and keeps the cancellation, so a drive that blocks
    (an undo cut or failed for good) goes on cancelling after the decision.
    """
    ctl = control_of(world)
    info = world.log.info(run_id)
    spec = runtime_of(world).known.get(info.workflow) if info is not None else None
    if ctl.get(run_id) is None or spec is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no event loop here to drive it in
        return False
    driver = default_driver(world)
    ctl.adopt(run_id, spec.name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock())
    driver.spawn(spec, ctl.request_cancel(run_id, reason, world.clock()), lock)
    return True


def handle(run_id: str, *, world: WorldCore) -> RunHandle:
    """The handle of an existing run, from any process.

    Its ``result()`` rebuilds the output as the workflow's annotated type
    when the workflow is known through this world object (it started the
    run, serves it in a worker, or passed it to ``recover_runs``); otherwise
    the output comes back as the log's JSON.

    Raises:
        RunNotFoundError: The world has no such run.
        ConfigurationError: ``run_id`` is not a string of valid text.
    """
    run_status(world, checked_run_id(run_id))
    info = world.log.info(run_id)
    rec = control_of(world).get(run_id)
    name = info.workflow if info is not None else rec.workflow if rec is not None else None
    return RunHandle(run_id, world, runtime_of(world).known.get(name) if name else None)


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def driver_of(world: WorldCore, run_id: str) -> dict[str, Any]:
    """Who drives a running run: ``{"driver": "live" | "orphaned", "pid": ..., "host": ...}``.

    A run whose lock can be taken has no live driver (the kernel frees the
    lock of a dead process): it is orphaned, and any worker resumes it. A
    driver on this host whose process is gone is orphaned at once, even
    while its lease (Postgres) has not run out yet.
    """
    locks = world.locks
    name = f"run:{run_id}"
    rec = control_of(world).get(run_id)
    pid, host = (rec.pid, rec.host) if rec is not None else (None, None)
    if live_guard(world, run_id) is not None:
        return {"driver": "live", "pid": pid, "host": host}
    if pid and host == HOST and not process_alive(pid):
        return {"driver": "orphaned", "pid": pid, "host": host}
    holder = getattr(locks, "holder", None)
    if pid is None and holder is not None:
        pid = holder(name)
    got = locks.try_acquire(name)
    if got is None:
        return {"driver": "live", "pid": pid, "host": host}
    locks.release(got)
    return {"driver": "orphaned", "pid": pid, "host": host}
