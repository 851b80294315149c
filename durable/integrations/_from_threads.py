"""Durable calls made from a framework's worker thread, recorded on the run's own event loop.

A run's bookkeeping (claims, the write buffer, flushes) belongs to the event
loop that drives it. Frameworks call back from other threads: LangGraph runs
a sync node of a graph awaited with ``ainvoke`` in an executor thread, and a
sync tool's body there too. ``on_run_loop`` hands such a call to the run's
loop and waits for it; the part that must run in the calling thread (the sync
body of the call: a blocking HTTP request, the tool's own code) is handed
back to the waiting thread, with the context the engine set around it, so
``durable.idempotency_key()`` works in it and no executor thread is taken
while the caller's own thread waits.

A thread cannot hand a call to a loop that waits for that very thread: a
sync ``graph.invoke(...)`` called from the run's own loop blocks it while
its tasks run in threads. ``on_run_loop`` refuses that with advice instead
of hanging.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import durable

from ..engine import CURRENT, RunContext

T = TypeVar("T")

_BLOCKING_CALLS = frozenset({"Pregel.stream", "Pregel.invoke", "Pregel.batch"})
"""Sync entry points that block the calling thread until the graph's tasks (in threads) finish."""


def current_run() -> RunContext | None:
    """The run of the current scope, or ``None`` outside a run."""
    scope = CURRENT.get()
    return None if scope is None else scope.run


def on_loop_thread(run: RunContext) -> bool:
    """Whether the caller runs on the thread of the run's event loop."""
    return threading.get_ident() == run.loop_thread


def _blocked_by(run: RunContext) -> str | None:
    """The sync graph call that holds the run's loop thread, if one does."""
    frame = sys._current_frames().get(run.loop_thread)
    while frame is not None:
        name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
        if name in _BLOCKING_CALLS and frame.f_globals.get("__name__", "").startswith("langgraph."):
            return name
        frame = frame.f_back
    return None


def refuse_blocked_loop(run: RunContext, what: str) -> None:
    """Refuse with advice (``ConfigurationError``) a call a sync graph call on the loop thread waits for."""
    held = _blocked_by(run)
    if held is None:
        return
    raise durable.ConfigurationError(
        f"run {run.run_id!r}: {what} was made from a worker thread while the run's event loop is "
        f"blocked in a sync {held.replace('Pregel.', 'graph.')}(...), which waits for that thread. "
        "Inside a durable run call 'await graph.ainvoke(...)' (or 'astream') instead of "
        "'graph.invoke(...)', then resume the run: "
        f"run_workflow(..., run_id={run.run_id!r}, retry_failed=True) or `little resume {run.run_id}`.",
        run_id=run.run_id,
    )


def on_run_loop(
    run: RunContext,
    call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[T]],
    body: Callable[[], Any] = lambda: None,
    *,
    what: str,
) -> T:
    """Run ``call(proxy)`` on the run's event loop from another thread and return its result.

    ``proxy`` is an async callable that runs ``body`` back in this thread (in
    the context current where ``proxy`` is awaited) and returns its value, so
    ``call`` can make ``body`` the body of a durable call. The coroutine runs
    in a copy of this thread's context (the current scope, LangGraph's config).

    Raises:
        ConfigurationError: The loop is blocked by a sync graph call waiting for this thread.
    """
    loop = run.loop
    if loop is None or loop.is_closed():
        raise durable.ConfigurationError(f"run {run.run_id!r} has no event loop to record {what} on.")
    refuse_blocked_loop(run, what)
    inbox: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()

    async def proxy() -> Any:
        done: asyncio.Future[Any] = loop.create_future()
        inbox.put(("body", contextvars.copy_context(), done))
        return await done

    def start() -> None:
        task = loop.create_task(_awaited(call(proxy)), context=context)
        task.add_done_callback(lambda t: inbox.put(("done", t, None)))

    context = contextvars.copy_context()
    loop.call_soon_threadsafe(start)
    while True:
        kind, first, second = inbox.get()
        if kind == "done":
            return first.result()  # type: ignore[no-any-return]
        try:
            value = first.run(body)
        except BaseException as exc:  # handed to the loop as the body's outcome
            loop.call_soon_threadsafe(_settle, second, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, second, value, None)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _settle(done: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if done.done():
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(value)
