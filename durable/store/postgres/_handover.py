"""``Handover``: what one statement took for the work this process does next, so it costs no round trip.

A worker's claim of a queued run takes, in the claim's own statement, the
run's lease (a ``leases`` row naming a new holder) and a new fencing token
(the run's token bumped, as ``fence`` does), and sees whether the run has
any event yet. The driver that follows asks the locks for the lease and the
log for a token, then reads the log; all three find what they need here
and send nothing (a run with no event reads as empty). The lease is handed
over only while it is young enough that the heartbeat renews it before it
runs out (an older one is renewed by a query first); a token is handed over
once: every later ``fence`` takes a new one. Nothing is weakened: the lease row and the token are in the
database before the claim returns, exactly as if the driver had taken them.

The book also knows the world's locks (``PostgresLocks``, which hold and
renew the leases), so that a run's end can delete its lease in the
statement that ends its control record, and the release that follows sends
nothing. That statement is the log's append of the run's end when the run's
record is claimed (``PostgresLog``): the book then keeps the state the
record was given, so that the control store's ``finish_many`` that follows
leaves that run out.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

_ENDED_KEPT = 4096
"""Records ended by their log's end kept for the ``finish`` to come; past it the oldest go."""

_TOKEN_AGE = 60.0
"""Seconds after which a token nobody asked for is forgotten (its run was claimed but not driven here)."""


class LeaseHolder(Protocol):
    """What the book needs of the locks: the leases they hold; to forget those a run's end deleted."""

    def holding(self, names: list[str]) -> dict[str, str]:
        """The holder id of each of ``names`` held now."""
        ...

    def dropped(self, leases: dict[str, str]) -> None:
        """Stop renewing ``leases`` (name -> holder): their rows are gone."""
        ...


class Handover:
    """Leases and fencing tokens taken ahead for this process, and the leases it holds.

    Attributes:
        locks: The world's locks on this database (set by ``PostgresLocks``), else ``None``.
        lease: Seconds of the world's leases (set by ``PostgresLocks``); ``None``: claims take no lease.
    """

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.lease: float | None = None
        self.locks: LeaseHolder | None = None
        self._leases: dict[str, tuple[str, float]] = {}  # name -> (holder, monotonic time taken)
        self._tokens: dict[str, tuple[int, float, bool]] = {}  # run_id -> (token, time taken, no events)
        self._ended: set[tuple[str, str]] = set()  # (name, holder) whose row a run's end deleted
        self._finished: dict[str, str] = {}  # run_id -> state its log's end gave its control record

    def give(self, run_id: str, holder: str, token: int, empty: bool = False) -> None:
        """Keep the lease ``run:<run_id>`` (held by ``holder``) and ``token`` that a claim took.

        ``empty``: the run had no event when the claim's statement bumped its token.
        """
        now = time.monotonic()
        with self.mutex:
            self._leases[f"run:{run_id}"] = (holder, now)
            self._tokens[run_id] = (token, now, empty)
            if len(self._tokens) > 64:  # drop what no driver asked for (runs claimed, then not driven)
                for rid, (_, at, _) in list(self._tokens.items()):
                    if now - at > _TOKEN_AGE:
                        del self._tokens[rid]
                        self._leases.pop(f"run:{rid}", None)

    def take_lease(self, name: str) -> tuple[str, float] | None:
        """The holder and age (seconds) of the lease a claim took under ``name``, once; else ``None``."""
        with self.mutex:
            got = self._leases.pop(name, None)
        return None if got is None else (got[0], time.monotonic() - got[1])

    def take_token(self, run_id: str) -> tuple[int, bool] | None:
        """The fencing token a claim took for ``run_id`` and whether the run had no event, once.

        ``None``: nothing was taken ahead (the caller fences).
        """
        with self.mutex:
            got = self._tokens.pop(run_id, None)
        return None if got is None else (got[0], got[2])

    def holders(self, names: list[str]) -> dict[str, str]:
        """The holder of each of ``names`` that this process holds."""
        return {} if self.locks is None else self.locks.holding(names)

    def ended(self, leases: dict[str, str]) -> None:
        """The rows of ``leases`` (name -> holder) were deleted with their runs' ends: stop renewing them."""
        if self.locks is not None:
            self.locks.dropped(leases)
        with self.mutex:
            self._ended.update(leases.items())

    def was_ended(self, name: str, holder: str) -> bool:
        """Whether the row of this lease was deleted by its run's end (then forget it)."""
        with self.mutex:
            if (name, holder) in self._ended:
                self._ended.discard((name, holder))
                return True
            return False

    def finished(self, run_id: str, state: str) -> None:
        """The append of ``run_id``'s end also ended its control record, as ``state``."""
        with self.mutex:
            self._finished[run_id] = state
            if len(self._finished) > _ENDED_KEPT:  # a record nobody finishes here: forget the oldest
                del self._finished[next(iter(self._finished))]

    def unfinished(self, ends: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Those of ``ends`` (run_id, state) that no log's end gave that state already (then forget it)."""
        with self.mutex:
            if not self._finished:
                return ends
            return [(rid, st) for rid, st in ends if self._finished.pop(rid, None) != st]
