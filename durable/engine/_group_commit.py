"""Group commit: the durable points of runs driven together share one transaction.

A worker drives many runs at once in one event loop, and each run commits at
each durable point (its start, each step, its end). Each of those commits
is a transaction of its own: with ``"power"`` durability an fsync each. When
a world drives more than one run, a commit instead joins the world's group:
the group commits at the next turn of the event loop, in one transaction of
the log (``append_each``), every append its runs gave it in this turn. Each
run waits for its own append, so the guarantee is the same as alone: the
commit is durable before the run goes on. A run whose append is fenced gets
its ``FencedError``; the others commit.

A world driving one run commits at once, as before: waiting for the next
turn would only add to its latency. A log without ``append_each`` (another
program's backend) is never grouped.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import FencedError

if TYPE_CHECKING:
    from ..store import Append, EventLog


class RunContext(Protocol):
    """What the group needs of a run's context (``_context.RunContext``): its log and its fault."""

    log: EventLog
    broken: BaseException | None


_Waiting = tuple["RunContext", "Append", "asyncio.Future[None]"]
"""A run, its append and the future its driver waits on."""


class GroupCommit:
    """The appends of one world's runs waiting for this event-loop turn's transaction.

    Args:
        log: The world's log; runs writing to another log (a view of the
            world over a wrapped log) are not grouped.

    Attributes:
        drives: The runs this world is driving now (the runner counts them).
        coming: Runs a runtime has handed to tasks that have not started yet
            (so that the first of a batch of claimed runs already groups).
        transactions: Transactions that committed the appends of several runs so far
            (for tests and diagnostics).

    Each event loop has its own group, so a world driven from two threads
    never mixes their runs in one transaction.
    """

    __slots__ = ("_each", "_pending", "coming", "drives", "log", "transactions")

    def __init__(self, log: EventLog):
        self.log = log
        self._each: Any = getattr(log, "append_each", None)
        self._pending: dict[asyncio.AbstractEventLoop, list[_Waiting]] = {}
        self.drives = 0
        self.coming = 0
        self.transactions = 0

    def takes(self, run: RunContext) -> bool:
        """Whether ``run``'s next commit joins the group (others are driven beside it)."""
        return self.drives + self.coming > 1 and self._each is not None and run.log is self.log

    async def commit(self, run: RunContext, append: Append) -> None:
        """Commit ``append`` with the other appends of this turn; return once it is durable.

        Raises:
            FencedError: Another driver holds the run (``run.broken`` is set).
            LogUnavailableError: The group's transaction failed (every run in it is broken).
        """
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            loop.call_soon(self.flush, loop)
        fut: asyncio.Future[None] = loop.create_future()
        pending.append((run, append, fut))
        try:
            await fut
        except asyncio.CancelledError:
            self.flush(loop)  # the append is decided before the run goes on (to write its end)
            raise

    def flush(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Commit every append waiting in ``loop`` (the running one by default) now.

        The loop's next turn does it; a run whose wait is cancelled does it
        at once, so that its next append follows this one.
        """
        pending = self._pending.pop(loop or asyncio.get_running_loop(), None)
        if not pending:
            return
        errors: list[BaseException | None]
        try:
            if len(pending) == 1:  # alone in its turn: the log's plain append is its cheapest commit
                errors = [None]
                try:
                    self.log.append([pending[0][1]])
                except FencedError as exc:
                    errors = [exc]
            else:
                errors = self._each([a for _, a, _ in pending])
                self.transactions += 1
        except BaseException as exc:
            errors = [exc] * len(pending)
        for (run, _, fut), error in zip(pending, errors, strict=True):
            if error is not None:
                # Nothing of this run's append was written: its driver must stop (as after
                # a failed flush); a resume reads what really is in the log.
                run.broken = error
            if fut.done():  # its wait was cancelled: the run sees ``broken`` at its next flush
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)
