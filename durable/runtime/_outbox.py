"""The outbox dispatcher and reconciler: calling ``@tool(outbox=True)`` bodies after their run committed.

Every worker runs one. A pass reads the due entries of the world's outbox
(``durable.store.OutboxStore``) and, for each one whose lock
(``outbox:<key>``) it can take, counts an attempt durably and calls the
tool's body with the entry's idempotency key. The lock is held for the
whole call, so two dispatchers never call the same entry at once; when a
dispatcher dies (SIGKILL, OOM) the kernel frees its lock and the next pass
of any worker re-drives the entry with the same key: that is the
reconciler, run at worker start and on every pass. A failed attempt is
retried under the tool's ``retry=`` policy (``DEFAULT_POLICY`` without one);
an entry that runs out of attempts is moved to the dead letter, where
``little outbox --dead`` lists it and ``little outbox retry KEY`` re-drives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..engine import EFFECT_KEY, OUTBOX_TOOLS, RetryPolicy, Spec, WorldCore, decide, encode, to_json
from ..store import OutboxEntry, OutboxStore

log = logging.getLogger("durable.runtime")

DEFAULT_POLICY = RetryPolicy(max_attempts=5)
"""The retry policy of an outbox tool without ``retry=``: 5 attempts, backoff doubling from 0.5 s."""


STOP_GRACE = 30.0
"""Seconds a stopping dispatcher waits for the tool bodies in flight before cancelling them."""


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"[:2000]


class OutboxDispatcher:
    """Calls the bodies of due outbox entries in this process's event loop.

    Args:
        world: The world whose outbox it serves.
        owner: Its name in each attempt (the worker's name).
        concurrency: Entries called at once at most.
        tools: Outbox tools by recorded name (default: every one this process defined).
    """

    def __init__(
        self, world: WorldCore, owner: str, *, concurrency: int = 16, tools: dict[str, Spec] | None = None
    ):
        self.world = world
        self.owner = owner
        self.concurrency = concurrency
        self._tools = tools
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._warned: set[str] = set()
        self._store: OutboxStore | None = None

    @property
    def store(self) -> OutboxStore:
        """The world's outbox, opened on first use."""
        if self._store is None:
            self._store = self.world.open_outbox()
        return self._store

    def tools(self) -> dict[str, Spec]:
        """The outbox tools this dispatcher can call."""
        return self._tools if self._tools is not None else OUTBOX_TOOLS

    def dispatch_pass(self) -> int:
        """Start a call for every due entry nobody is calling; return how many started."""
        world, store = self.world, self.store
        room = self.concurrency - len(self.tasks)
        if room <= 0:
            return 0
        started = 0
        for entry in store.due(world.clock(), limit=room + len(self.tasks)):
            if started >= room:
                break
            if entry.key in self.tasks:
                continue
            spec = self.tools().get(entry.tool)
            if spec is None:
                if entry.key not in self._warned:
                    self._warned.add(entry.key)
                    log.warning(
                        "outbox entry %s is left alone: this process has no tool %r", entry.key, entry.tool
                    )
                continue
            lock = world.locks.try_acquire(f"outbox:{entry.key}")
            if lock is None:
                continue  # its dispatcher is alive
            try:
                attempt = store.start_attempt(entry.key, self.owner, world.clock())
            except BaseException:
                world.locks.release(lock)
                raise
            if attempt is None:  # delivered or dead meanwhile
                world.locks.release(lock)
                continue
            self.tasks[entry.key] = asyncio.get_running_loop().create_task(
                self._call(spec, attempt, lock), name=f"outbox:{entry.key}"
            )
            started += 1
        return started

    async def _call(self, spec: Spec, entry: OutboxEntry, lock: object) -> None:
        world, store = self.world, self.store
        try:
            try:
                kwargs = _arguments(spec, entry)
                token = EFFECT_KEY.set(entry.key)
                try:
                    result = await spec.fn(**kwargs)
                finally:
                    EFFECT_KEY.reset(token)
                data = encode(
                    to_json(spec.out, result, what="the result", run_id=entry.run_id, path=entry.key)
                )
            except Exception as exc:
                policy = spec.retry or DEFAULT_POLICY
                now = world.clock()
                d = decide(
                    policy,
                    exc,
                    attempt=entry.attempts,
                    first_attempt_at=entry.created_at,
                    now=now,
                    idle_for=0.0,
                )
                store.fail(entry.key, _error_text(exc), now + d.backoff if d.retry else None, now)
                if not d.retry:
                    log.warning(
                        "outbox entry %s is dead after %d attempts: %s", entry.key, entry.attempts, exc
                    )
                return
            store.deliver(entry.key, data, world.clock())
        except Exception as exc:  # the store itself failed: the entry stays pending, re-driven later
            log.warning("outbox entry %s: %s", entry.key, str(exc).splitlines()[0] if str(exc) else exc)
        finally:
            world.locks.release(lock)
            self.tasks.pop(entry.key, None)

    async def drain(self, timeout: float | None = None) -> None:
        """Dispatch until nothing is due and nothing runs (tests, scripts), or ``timeout`` passes."""
        async with asyncio.timeout(timeout):
            while True:
                self.dispatch_pass()
                if not self.tasks:
                    if not self.store.due(self.world.clock(), limit=1):
                        return
                    await asyncio.sleep(0.01)  # due entries held by another dispatcher
                    continue
                await asyncio.wait(list(self.tasks.values()), return_when=asyncio.FIRST_COMPLETED)

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Let the calls in flight finish for ``grace`` seconds, then cancel them.

        A cancelled call's entry stays pending with its attempt counted; the
        next dispatcher re-drives it with the same key.
        """
        tasks = list(self.tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)


def _arguments(spec: Spec, entry: OutboxEntry) -> dict[str, Any]:
    """The body's keyword arguments, rebuilt from the entry's JSON by the tool's annotations."""
    import json

    return spec.load_input(json.loads(entry.input))


async def dispatch_outbox(world: WorldCore, *, timeout: float | None = None) -> None:
    """Call every due outbox entry of ``world`` from this process until none is left.

    A ``Worker`` does this all the time; this is for scripts and tests that
    run no worker.
    """
    d = OutboxDispatcher(world, "dispatch_outbox")
    with contextlib.suppress(asyncio.CancelledError):
        await d.drain(timeout)
