"""The time durable reads: the real clock, or a virtual one in tests (``durable.testing.virtual_time``).

``wall()`` and ``monotonic()`` are what the engine, the runtime and the stores
read instead of ``time.time()`` and ``time.monotonic()``. Outside
``virtual_time()`` they are those functions. Inside, they read the
``VirtualClock`` of the current context (a context variable, so each test,
task tree or thread that copied the context has its own): the real clock
plus every jump the clock made. The clock takes over the event loop it runs
in (``loop.time()`` reads it too, so every ``asyncio.sleep``, timeout and
timer is virtual) and, whenever the loop has nothing ready to run, no I/O
waiting and no thread working for it, jumps to the loop's next timer instead
of waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from typing import Any

from .errors import ConfigurationError

VIRTUAL: contextvars.ContextVar[VirtualClock | None] = contextvars.ContextVar(
    "durable_virtual_clock", default=None
)


def wall() -> float:
    """Seconds since the epoch: the real ``time.time()``, or the virtual clock's reading."""
    clock = VIRTUAL.get()
    if clock is None:
        return time.time()
    clock.take_loop()
    return time.time() + clock.skipped


def monotonic() -> float:
    """A monotonic reading: the real ``time.monotonic()``, or the virtual clock's."""
    clock = VIRTUAL.get()
    if clock is None:
        return time.monotonic()
    clock.take_loop()
    return time.monotonic() + clock.skipped


async def poll_sleep(seconds: float) -> None:
    """``asyncio.sleep`` for a loop that polls: in virtual time the clock does not jump for it."""
    clock = VIRTUAL.get()
    if clock is None:
        await asyncio.sleep(seconds)
        return
    await clock.poll(seconds, None)


async def poll_wait(event: asyncio.Event, seconds: float) -> None:
    """Wait for ``event`` at most ``seconds``, as a poll (see ``poll_sleep``); it stays set."""
    clock = VIRTUAL.get()
    if clock is None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()
        return
    await clock.poll(seconds, event)


def due_at(when: float) -> Any:
    """In virtual time, a timer at the wall time ``when`` the clock jumps to (cancel it after); else ``None``.

    A poller that knows its next due time (a worker and the next tick of a
    schedule, a wait and its timeout) sets one, so the clock does not jump
    past it. When it is due, every poll of the clock ends at once: a poll
    begun just before the due time would otherwise end after it, and the
    clock, which does not jump for polls, would first jump on to the next
    timer that is not one (the poller would look late by that much).
    """
    clock = VIRTUAL.get()
    if clock is None:
        return None
    loop = asyncio.get_running_loop()
    return loop.call_later(max(0.0, when - wall()), clock.end_polls)


class _JumpingSelector:
    """The loop's selector, which jumps the clock instead of blocking when the loop is idle."""

    def __init__(self, real: Any, clock: VirtualClock) -> None:
        self._real = real
        self._clock = clock

    def select(self, timeout: float | None = None) -> Any:
        if timeout is not None and timeout <= 0:
            return self._real.select(timeout)
        ready = self._real.select(0)
        if ready:
            return ready
        if self._clock.threads or timeout is None:
            # A thread works for the loop (its answer comes through the self-pipe), or no timer is
            # due at all: wait for real, briefly, and look again.
            return self._real.select(0.01 if timeout is None else min(timeout, 0.01))
        self._clock.jump(max(timeout, self._clock.until_due(timeout)))
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class VirtualClock:
    """A clock that runs at real speed and jumps ahead whenever its event loop would wait.

    Attributes:
        skipped: Seconds jumped so far (the virtual clock is the real one plus this).
        jumps: How many jumps it made.
    """

    def __init__(self) -> None:
        self.skipped = 0.0
        self.jumps = 0
        self.threads = 0
        self.polls: dict[Any, tuple[Any, Any]] = {}  # each poll's timer (not jumped for): (loop, end)
        self._loops: list[tuple[Any, Any, Any]] = []  # (loop, real selector, real run_in_executor)

    def until_due(self, first: float) -> float:
        """Seconds to the running loop's next timer that is not a poll (``first`` when only polls wait)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = [h.when() for h in getattr(loop, "_scheduled", ()) if not h.cancelled() and h not in self.polls]
        return min(due) - now if due else first

    async def poll(self, seconds: float, event: asyncio.Event | None) -> None:
        """Wait ``seconds`` (or until ``event`` is set) on a timer the clock does not jump for."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def ring() -> None:
            if not done.done():
                done.set_result(None)

        handle = loop.call_later(seconds, ring)
        self.polls[handle] = (loop, ring)
        waiter = None if event is None else asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait(
                [done] if waiter is None else [done, waiter], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            handle.cancel()
            self.polls.pop(handle, None)
            if waiter is not None:
                waiter.cancel()

    def end_polls(self) -> None:
        """End every poll of the running loop now (a due time came: each poller looks again at it).

        A poll of another loop (a thread that runs its own, on this clock) is
        left alone: its future belongs to that loop.
        """
        loop = asyncio.get_running_loop()
        for owner, ring in list(self.polls.values()):
            if owner is loop:
                ring()

    def now(self) -> float:
        """The virtual time, in seconds since the epoch."""
        return time.time() + self.skipped

    def monotonic(self) -> float:
        """The virtual monotonic reading (what the loop's ``time()`` returns)."""
        return time.monotonic() + self.skipped

    def jump(self, seconds: float) -> None:
        """Move the clock ahead by ``seconds`` (the loop's next timer is then due)."""
        self.skipped += max(0.0, seconds)
        self.jumps += 1

    def take_loop(self) -> None:
        """Run the running event loop on this clock (once per loop; no loop running, nothing to do)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if any(owned is loop for owned, _, _ in self._loops):
            return
        selector = getattr(loop, "_selector", None)
        if selector is None or not hasattr(selector, "select"):
            raise ConfigurationError(
                f"virtual_time() needs asyncio's own selector event loop, not {type(loop).__name__}; "
                "run the test without uvloop or another loop policy."
            )
        real_executor = loop.run_in_executor

        def run_in_executor(executor: Any, func: Any, *args: Any) -> Any:
            self.threads += 1
            fut = real_executor(executor, func, *args)

            def done(_: Any) -> None:
                self.threads -= 1

            fut.add_done_callback(done)
            return fut

        loop._selector = _JumpingSelector(selector, self)  # type: ignore[attr-defined]
        loop.time = self.monotonic  # type: ignore[method-assign]
        loop.run_in_executor = run_in_executor  # type: ignore[method-assign, assignment]
        self._loops.append((loop, selector, real_executor))

    def release(self) -> None:
        """Give every loop taken back its real clock and selector."""
        for loop, selector, _ in self._loops:
            if not loop.is_closed():
                loop._selector = selector
                del loop.time
                del loop.run_in_executor
        self._loops.clear()
