"""The runtime's guard over a driven run: cancellation, deadline and a worker's stop.

The engine asks the guard at every durable call and hands it every durable
wait (``durable.engine._context.Guard``). A cancellation from this process reaches
the guard at once; one from another process arrives through the control
store, which the driver polls for the runs it drives.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from .._clock import due_at
from ..errors import RunCancelled

if TYPE_CHECKING:
    from ..engine import RunContext

_UNSET: Any = object()


class WorkerStopping(BaseException):
    """The worker driving the run stops; the run is left resumable at its durable point."""


class RunGuard:
    """One driven run's guard, shared with its child runs (a parent's cancellation reaches them).

    Attributes:
        run_id: The run it guards.
        reason: The cancellation seen (``requested`` or ``deadline``), or ``None``.
        stopping: The driver stops: the run halts at its next durable point.
    """

    __slots__ = ("_deadline_at", "_wakers", "reason", "run_id", "stopping")

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.reason: str | None = None
        self.stopping = False
        self._deadline_at: float | None = _UNSET
        self._wakers: set[asyncio.Future[None]] = set()

    # -- what the engine calls -------------------------------------------------

    def check(self, run: RunContext) -> None:
        if self.reason is not None:
            raise self._cancelled()
        if self.stopping:
            raise WorkerStopping(f"the worker driving run {self.run_id!r} stops")
        at = self.deadline_at(run)
        if at is not None and run.clock() >= at:
            self.reason = "deadline"
            raise self._cancelled()

    async def pause(self, run: RunContext, seconds: float, sleep: Any = None) -> None:
        self.check(run)
        at = self.deadline_at(run)
        due = None
        if at is not None:
            seconds = min(seconds, max(at - run.clock(), 0.0))
            due = due_at(at)  # in virtual time, the clock stops at the deadline
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        self._wakers.add(woken)
        sleeper = asyncio.ensure_future((sleep or run.sleep)(seconds))
        try:
            await asyncio.wait([sleeper, woken], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if due is not None:
                due.cancel()
            self._wakers.discard(woken)
            if not sleeper.done():
                sleeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sleeper
        self.check(run)

    def child(self, run: RunContext) -> RunGuard:
        self.deadline_at(run)  # the parent's deadline bounds the child: fix it before
        return self

    # -- what the runtime calls ------------------------------------------------

    def deadline_at(self, run: RunContext) -> float | None:
        """The absolute deadline recorded in the (root) run's ``run.started``, read once."""
        if self._deadline_at is _UNSET:
            started = run.recorded.started or {}
            self._deadline_at = started.get("deadline_at")
        return self._deadline_at

    def cancel(self, reason: str) -> None:
        """Stop the run at its next durable call; a durable wait ends now."""
        if self.reason is None:
            self.reason = reason
        self._wake()

    def stop(self) -> None:
        """Halt the run at its next durable point, leaving it resumable."""
        self.stopping = True
        self._wake()

    def _wake(self) -> None:
        for w in list(self._wakers):
            if not w.done():
                w.set_result(None)

    def _cancelled(self) -> RunCancelled:
        reason = self.reason or "requested"
        what = "its deadline passed" if reason == "deadline" else "cancel() was called"
        return RunCancelled(
            f"run {self.run_id!r} was cancelled ({what}); continue it with "
            f"durable.resume_run({self.run_id!r}, world=...).",
            run_id=self.run_id,
            reason=reason,
        )
