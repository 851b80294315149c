"""``Notifier``: one connection per process that ``LISTEN``s to a Postgres world's changes.

Writers announce with ``pg_notify`` inside their own transaction (so the
announcement is delivered at commit, never before): new work on a queue, a
finished or cancelled run, a cancellation request. The notifier counts what
it hears, so ``PostgresControl.version()`` is a local read that a worker may
poll every millisecond without a query, and it wakes the waiters of
``wait()``. A lost connection is reopened with backoff; each reconnect counts
as a change, since announcements may have been missed meanwhile (the
runtime's periodic claims and polls are the fallback).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any

log = logging.getLogger("durable.store")

RECENT = 4096
"""Distinct announcements a notifier remembers, for ``heard_lately``."""


class Announcements:
    """What a listener heard: a count, the latest distinct payloads, and who to wake for each.

    Subscribers are kept by what they wait for, so an announcement wakes its
    own subscribers without testing every other one: a process awaiting a
    thousand results costs one look-up per announcement, not a thousand
    tests. Every method may be called from any thread.
    """

    def __init__(self) -> None:
        self.count = 0
        """Notifications heard (and reconnects) so far."""
        self._recent: OrderedDict[str, None] = OrderedDict()  # the last RECENT payloads heard, oldest first
        self._cond = threading.Condition()
        self._ids = itertools.count()
        self._everyone: dict[int, Callable[[], None]] = {}  # every subscriber, for a reconnect
        self._all: dict[int, Callable[[], None]] = {}  # those woken by every announcement
        self._exact: dict[str, dict[int, Callable[[], None]]] = {}  # by the payload they name
        self._prefixed: dict[str, dict[int, Callable[[], None]]] = {}  # by the prefix they name

    def subscribe(self, on_change: Callable[[], None], about: Collection[str] = ()) -> Callable[[], None]:
        """Call ``on_change`` at each announcement ``about`` names, and at every reconnect.

        Args:
            on_change: Called from the listening thread, at most once per announcement.
            about: Payloads (``run:<id>``) and prefixes (ending in ``:``, such as
                ``queue:``) to wake for; empty: every announcement.

        Returns:
            A function that ends the subscription (calling it again does nothing).
        """
        names = tuple(about)
        with self._cond:
            key = next(self._ids)
            self._everyone[key] = on_change
            if not names:
                self._all[key] = on_change
            for a in names:
                (self._prefixed if a.endswith(":") else self._exact).setdefault(a, {})[key] = on_change

        def stop() -> None:
            with self._cond:
                if self._everyone.pop(key, None) is None:
                    return
                self._all.pop(key, None)
                for a in names:
                    index = self._prefixed if a.endswith(":") else self._exact
                    subs = index.get(a)
                    if subs is not None:
                        subs.pop(key, None)
                        if not subs:
                            del index[a]

        return stop

    def _bump(self, payload: str | None) -> None:
        with self._cond:
            self.count += 1
            if payload is None:  # a reconnect: anything may have changed
                woken = list(self._everyone.values())
            else:
                recent = self._recent
                if payload in recent:
                    recent.move_to_end(payload)
                else:
                    recent[payload] = None
                    if len(recent) > RECENT:  # the oldest goes, at once (a dict's first key is a scan)
                        recent.popitem(last=False)
                woken = self._woken_by(payload)
            self._cond.notify_all()
        for on_change in woken:
            with contextlib.suppress(Exception):  # a closed loop: its subscriber is gone
                on_change()

    def _woken_by(self, payload: str) -> list[Callable[[], None]]:
        """The subscribers ``payload`` wakes, each once (called under the lock)."""
        woken = dict(self._all)
        woken.update(self._exact.get(payload, ()))
        for prefix, subs in self._prefixed.items():
            if payload.startswith(prefix):
                woken.update(subs)
        return list(woken.values())

    @property
    def last_heard(self) -> str | None:
        """The payload of the latest announcement heard (``None`` before the first)."""
        with self._cond:  # the listening thread may be changing it
            return next(reversed(self._recent), None)

    def heard_lately(self, payload: str) -> bool:
        """Whether ``payload`` is among the last ``RECENT`` distinct announcements heard (a hint only)."""
        return payload in self._recent


class Notifier(Announcements):
    """A daemon thread listening on one channel.

    Args:
        dsn: The connection string (the listener has a connection of its own, outside the pool).
        channel: The channel (``Database.channel``).
        lock: The world's advisory lock, held shared by the listener's session as by the pool's.
    """

    def __init__(self, dsn: str, channel: str, lock: int | None = None):
        super().__init__()
        self.dsn = dsn
        self.channel = channel
        self.lock = lock
        self._closing = False
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="durable-listen", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the first ``LISTEN`` is in place (announcements before it are not heard)."""
        return self._ready.wait(timeout)

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        delay = 0.05
        while not self._closing:
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                    if self.lock is not None:
                        conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (self.lock,))
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._bump(None)  # anything may have happened while nobody listened
                    self._ready.set()
                    delay = 0.05
                    while not self._closing:
                        for n in conn.notifies(timeout=0.25):
                            self._bump(n.payload)
            except Exception as exc:
                if self._closing:
                    return
                log.debug("listener on %s lost its connection (%s); reconnecting", self.channel, exc)
                with self._cond:
                    self._cond.wait(delay)
                delay = min(delay * 2, 2.0)

    def close(self) -> None:
        """Stop listening (within a quarter of a second)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        with contextlib.suppress(RuntimeError):
            self._thread.join(timeout=2)


def notify(conn: Any, channel: str, payload: str) -> None:
    """Announce ``payload`` on ``channel`` at the commit of ``conn``'s transaction."""
    conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))
