"""The retry bookkeeping of one call: its attempt number, its timing and the backoff still due.

Read from the run's recorded ``retry.decision`` events, so that a resume goes
on counting where the log stopped; used by the retry loop of steps and
effects and by the compensations of a failed run.
"""

from __future__ import annotations

from .._logging import ERROR, WARNING, note
from ..errors import NonRetryableError
from ..events import RETRY_DECISION
from . import _event_writer as ev
from ._context import RunContext
from ._failures import error_type
from ._recorded import Recorded
from ._retry_policy import Decision, RetryPolicy, decide


class Attempts:
    """The retry bookkeeping of one call: attempt number, timing and the pending backoff."""

    __slots__ = ("attempt", "first_at", "idle", "key", "policy", "run", "wake")

    def __init__(self, run: RunContext, key: str, policy: RetryPolicy):
        self.run = run
        self.key = key
        self.policy = policy
        rec: Recorded = run.recorded
        decisions = [d for d in rec.retries.get(key, ()) if d.get("decision") == "retry"]
        self.attempt = 1 + len(decisions)
        self.wake = rec.pending_wake(key)
        self.idle = sum(float(d.get("backoff") or 0.0) for d in decisions)
        first = decisions[0].get("first_attempt_at") if decisions else None
        self.first_at = float(first) if first is not None else run.clock()

    async def wait_backoff(self) -> None:
        """Sleep what is left of the backoff before the due attempt (nothing when past)."""
        if self.wake is not None:
            remaining = self.wake - self.run.clock()
            self.wake = None
            if remaining > 0:
                await self.run.pause(remaining)

    def decide(self, exc: BaseException) -> Decision:
        """Ask the policy about ``exc`` (``NonRetryableError`` gives up at once)."""
        if isinstance(exc, NonRetryableError):
            return Decision(False, 0.0)
        return decide(
            self.policy,
            exc,
            attempt=self.attempt,
            first_attempt_at=self.first_at,
            now=self.run.clock(),
            idle_for=self.idle,
        )

    def record(self, exc: BaseException, decision: Decision) -> None:
        """Buffer the ``retry.decision`` event and move on to the next attempt when retrying."""
        wake = self.run.clock() + decision.backoff if decision.retry else None
        self.run.emit(
            RETRY_DECISION,
            ev.retry_decision(
                self.key, self.attempt, decision.retry, decision.backoff, wake, error_type(exc), self.first_at
            ),
        )
        if decision.retry:
            note(
                WARNING,
                self.run.run_id,
                self.key,
                "run %s: %s attempt %d failed (%s); retrying in %.3g s",
                self.run.run_id,
                self.key,
                self.attempt,
                error_type(exc),
                decision.backoff,
                attempt=self.attempt,
                retry=True,
                backoff=decision.backoff,
                error_type=error_type(exc),
            )
            self.attempt += 1
            self.idle += decision.backoff
            self.wake = wake
        else:
            note(
                ERROR,
                self.run.run_id,
                self.key,
                "run %s: %s attempt %d failed (%s); giving up",
                self.run.run_id,
                self.key,
                self.attempt,
                error_type(exc),
                attempt=self.attempt,
                retry=False,
                backoff=0.0,
                error_type=error_type(exc),
            )
