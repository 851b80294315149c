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
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("durable.store")

RECENT = 4096
"""Distinct announcements a notifier remembers, for ``heard_lately``."""


class Notifier:
    """A daemon thread listening on one channel.

    Args:
        dsn: The connection string (the listener has a connection of its own, outside the pool).
        channel: The channel (``Database.channel``).
    """

    def __init__(self, dsn: str, channel: str):
        self.dsn = dsn
        self.channel = channel
        self.count = 0
        """Notifications heard (and reconnects) so far."""
        self._recent: dict[str, None] = {}  # the last RECENT payloads heard, oldest first
        self.listeners: list[Callable[[str | None], None]] = []
        """Called (from the listening thread) with each notification's payload (``None``: a reconnect)."""
        self._cond = threading.Condition()
        self._closing = False
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="durable-listen", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the first ``LISTEN`` is in place (announcements before it are not heard)."""
        return self._ready.wait(timeout)

    def _bump(self, payload: str | None) -> None:
        with self._cond:
            self.count += 1
            if payload is not None:
                recent = self._recent
                recent.pop(payload, None)
                recent[payload] = None
                if len(recent) > RECENT:
                    del recent[next(iter(recent))]
            self._cond.notify_all()
            listeners = list(self.listeners)
        for on_change in listeners:
            with contextlib.suppress(Exception):  # a closed loop: its subscriber is gone
                on_change(payload)

    @property
    def last_heard(self) -> str | None:
        """The payload of the latest announcement heard (``None`` before the first)."""
        with self._cond:  # the listening thread may be changing it
            return next(reversed(self._recent), None)

    def heard_lately(self, payload: str) -> bool:
        """Whether ``payload`` is among the last ``RECENT`` distinct announcements heard (a hint only)."""
        return payload in self._recent

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        delay = 0.05
        while not self._closing:
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
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
