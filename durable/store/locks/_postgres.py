"""``PostgresLocks``: one driver per run across machines, through lease rows with heartbeats.

A lock is a row of ``leases``: its holder (one id per acquisition), the
holder's pid and host, and an expiry in the server's clock (so the clocks of
the workers do not matter). ``try_acquire`` inserts the row, or takes it
over when its lease has expired; a daemon thread renews every lease this
process holds every ``heartbeat`` seconds, and only while the row still
names this holder. A process that dies stops renewing, and its runs are
free ``lease`` seconds after the last renewal at the latest.

A lease alone cannot stop a process that was paused (SIGSTOP, a long GC, a
partition) past its lease: it wakes up believing it still drives the run.
The fencing token does: the worker that took the run over fenced it before
reading the log, so every append of the paused one is refused
(``FencedError``) in the append's own transaction.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from typing import TYPE_CHECKING, Any

from ..postgres._schema import Database

if TYPE_CHECKING:
    from psycopg import Connection

log = logging.getLogger("durable.store")

HOST = socket.gethostname()


class PostgresLocks:
    """Named exclusive leases in a Postgres world (``Locks`` protocol).

    Args:
        db: The pool and schema.
        lease: Seconds a lease lasts without a renewal.
        heartbeat: Seconds between two renewals (less than ``lease``).
    """

    def __init__(self, db: Database, *, lease: float, heartbeat: float):
        self.db = db
        self.lease = lease
        self.heartbeat = heartbeat
        self.lost: set[str] = set()
        """Names whose lease this process held and found taken over at a renewal."""
        self._held: dict[str, str] = {}  # name -> holder id
        self._mutex = threading.Lock()
        self._book = db.handover
        self._book.lease = lease  # claims on this database take their runs' leases for this process
        self._book.locks = self
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._acquire = db.sql(
            "INSERT INTO {s}.leases (name, holder, pid, host, expires_at) "
            "VALUES (%s, %s, %s, %s, clock_timestamp() + make_interval(secs => %s)) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, "
            "host = excluded.host, expires_at = excluded.expires_at "
            "WHERE {s}.leases.expires_at < clock_timestamp() RETURNING holder"
        )

    def try_acquire(self, name: str) -> object | None:
        """Take the lease now (or take over an expired one), or ``None`` when it is held.

        A lease that this process's claim took a moment ago (``Handover``) is
        handed over without a query; an older one is renewed first.
        """
        given = self._book.take_lease(name)
        if given is not None and (
            given[1] < (self.lease - self.heartbeat) / 2 or self._renew_one(name, given[0])
        ):
            return self._hold(name, given[0])
        holder = uuid.uuid4().hex

        def op(conn: Connection[Any], attempt: int) -> bool:
            row = conn.execute(self._acquire, (name, holder, os.getpid(), HOST, self.lease)).fetchone()
            if row is not None:
                return True
            if attempt:  # the lost attempt may have taken it: the row would name us
                got = conn.execute(self.db.sql("SELECT holder FROM {s}.leases WHERE name = %s"), (name,))
                found = got.fetchone()
                return found is not None and found[0] == holder
            return False

        if not self.db.run(op):
            return None
        return self._hold(name, holder)

    def _renew_one(self, name: str, holder: str) -> bool:
        """Renew one lease this process took; ``False`` when it is no longer ours."""

        def op(conn: Connection[Any], attempt: int) -> bool:
            row = conn.execute(
                self.db.sql(
                    "UPDATE {s}.leases SET expires_at = clock_timestamp() + make_interval(secs => %s) "
                    "WHERE name = %s AND holder = %s RETURNING 1"
                ),
                (self.lease, name, holder),
            ).fetchone()
            return row is not None

        return self.db.run(op)

    def _hold(self, name: str, holder: str) -> tuple[str, str]:
        """Count the lease as held (the heartbeat renews it from now on)."""
        with self._mutex:
            self._held[name] = holder
            self.lost.discard(name)
            if self._thread is None and not self._closing:
                self._thread = threading.Thread(
                    target=self._beat, name="durable-lease-heartbeat", daemon=True
                )
                self._thread.start()
        return (name, holder)

    def holding(self, names: list[str]) -> dict[str, str]:
        """The holder id of each of ``names`` this process holds now."""
        with self._mutex:
            return {n: self._held[n] for n in names if n in self._held}

    def dropped(self, leases: dict[str, str]) -> None:
        """Stop renewing ``leases`` (name -> holder): a run's end deleted their rows."""
        with self._mutex:
            for name, holder in leases.items():
                if self._held.get(name) == holder:
                    del self._held[name]

    def release(self, handle: object) -> None:
        """Give the lease back (a lease already taken over by another holder is left alone)."""
        assert isinstance(handle, tuple)
        name, holder = handle
        with self._mutex:
            if self._held.get(name) == holder:
                del self._held[name]
        if self._book.was_ended(name, holder):
            return  # its run's end deleted the row already (``PostgresControl.finish_many``)

        def op(conn: Connection[Any], attempt: int) -> None:
            conn.execute(
                self.db.sql("DELETE FROM {s}.leases WHERE name = %s AND holder = %s"), (name, holder)
            )

        try:
            self.db.run(op)
        except Exception as exc:  # the lease expires by itself
            log.warning("lease %s was not released (%s); it expires in %g s", name, exc, self.lease)

    def holder(self, name: str) -> int | None:
        """The pid of the lease's holder while the lease is live, if any."""

        def op(conn: Connection[Any], attempt: int) -> int | None:
            row = conn.execute(
                self.db.sql("SELECT pid FROM {s}.leases WHERE name = %s AND expires_at >= clock_timestamp()"),
                (name,),
            ).fetchone()
            return None if row is None or row[0] is None else int(row[0])

        return self.db.run(op)

    def free(self, names: list[str]) -> set[str]:
        """The names among ``names`` that no live lease holds (one query, for recovery passes)."""
        if not names:
            return set()

        def op(conn: Connection[Any], attempt: int) -> set[str]:
            cur = conn.execute(
                self.db.sql(
                    "SELECT n FROM unnest(%s::text[]) AS n WHERE NOT EXISTS (SELECT 1 FROM {s}.leases "
                    "WHERE name = n AND expires_at >= clock_timestamp())"
                ),
                (names,),
            )
            return {r[0] for r in cur}

        return self.db.run(op)

    def renew(self) -> None:
        """Renew every lease this process holds now (the heartbeat calls it)."""
        with self._mutex:
            held = dict(self._held)
        if not held:
            return
        names, holders = list(held), list(held.values())

        def op(conn: Connection[Any], attempt: int) -> set[str]:
            cur = conn.execute(
                self.db.sql(
                    "UPDATE {s}.leases AS l SET expires_at = clock_timestamp() + make_interval(secs => %s) "
                    "FROM unnest(%s::text[], %s::text[]) AS h(name, holder) "
                    "WHERE l.name = h.name AND l.holder = h.holder RETURNING l.name"
                ),
                (self.lease, names, holders),
            )
            return {r[0] for r in cur}

        renewed = self.db.run(op)
        with self._mutex:
            for name, holder in held.items():
                if name not in renewed and self._held.get(name) == holder:
                    del self._held[name]  # another worker took it over: fencing stops our writes
                    self.lost.add(name)
                    log.warning("lease %s was taken over by another worker", name)

    def _beat(self) -> None:
        while not self._closing:
            self._wake.wait(self.heartbeat)
            if self._closing:
                return
            with contextlib.suppress(Exception):  # a lost server: the next beat tries again
                self.renew()

    def close(self) -> None:
        """Stop the heartbeat (the leases still held expire by themselves)."""
        self._closing = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
