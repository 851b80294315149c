"""The one sequence every durable call goes through: claim, key, decide, record, release.

Each kind of call (step, effect, streamed model call, child run, recorded
value, durable sleep, interrupt, agent session) runs it the same way::

    with Claim(scope, "tool 'score'") as claim:            # claim the next position
        key = effect_key(scope.prefix, "tool", name, claim.n)  # build its key (_keys)
        action, record = claim.effect(Call(...), data, ...)    # ask the log (pure: _decide)
        ...                                                    # replay, or run and write events
    # the scope is released, whatever happened

``Claim`` looks up what the recorded index holds at the key and at the
position, hands both to the pure decision, and applies the one decision
that changes the index (a fork's inherited call that runs again is
forgotten). A step, the most frequent call, asks ``_decide.decide_step``
itself, which reads the index at its path, and hands a call that executes
to ``Claim.execute``. Writing the call's events stays with its kind.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .._logging import ERROR, WARNING, note
from ..errors import NondeterminismError, UnknownCommitError
from ._decide import (
    EXECUTE,
    RECONCILE,
    REDRIVE,
    RERUN,
    Action,
    Call,
    check_position,
    decide_effect,
)

if TYPE_CHECKING:
    from ._context import RunContext, Scope
    from ._rebind import SignatureChange

Json = dict[str, Any]

REPLAYED = object()
"""What a kind's begin function returns first when the call's outcome is recorded."""


def _concurrent(scope: Scope, what: str) -> NondeterminismError:
    run_id = scope.run.run_id
    return NondeterminismError(
        f"run {run_id!r}: {what} started in scope {scope.path or '<workflow>'!r} "
        f"while {scope.busy} is still running there. Completion order is timing, and "
        "timing does not replay: give each concurrent call its own scope with "
        "durable.parallel(...) or 'async with durable.branch(key)'.",
        run_id=run_id,
        path=scope.path,
    )


def _confirmed(run: RunContext, scope: Scope) -> bool:
    """Whether the log holds this call's outcome: it replays before a cancellation is seen.

    A run cancelled while it is recovered replays every confirmed call first,
    so the compensations of all of them are known when the cancellation ends it.
    """
    if not run.replaying:
        return False
    rec = run.recorded
    call = rec.position(scope.path, scope.n)
    if call is None:
        return False
    key = call.key
    if key in rec.intents:
        return key in rec.receipts
    if key in rec.steps_started:
        return key in rec.steps_completed or key in rec.steps_failed
    if key in rec.interrupts:  # one that waits on its answer: the cancellation ends the run there
        return key in rec.answers
    return True  # a sleep still due asks the guard while it waits


class Claim:
    """One durable call's hold on its scope: its ordinal, and what the log says about it.

    Entering a scope that another call still holds raises
    ``NondeterminismError`` (completion order is timing); leaving the
    ``with`` block releases the scope, however the call ended.
    """

    __slots__ = ("n", "run", "scope")

    def __init__(self, scope: Scope, what: str):
        run = scope.run
        if run.guard is not None and not _confirmed(run, scope):  # cancelled, past its deadline?
            run.guard.check(run)
        if scope.busy is not None:
            raise _concurrent(scope, what)
        scope.busy = what
        self.n = n = scope.n
        scope.n = n + 1
        self.scope = scope
        self.run: RunContext = run

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.scope.busy = None

    # -- the decision, per kind of record ---------------------------------------

    def execute(self, action: Action, attempted: Call) -> None:
        """Make ready to execute a call its decision did not replay or fail.

        A fork's inherited record whose input changed (``RERUN``) is
        forgotten; then the call must be the one recorded at its position.
        """
        if action is RERUN:
            self.run.recorded.forget(attempted.key)
        self.check_position(attempted)

    def effect(
        self,
        attempted: Call,
        input_data: Any,
        *,
        redrivable: bool,
        reconcilable: bool,
        signature: SignatureChange | None = None,
    ) -> tuple[Action, Json | None]:
        """The decision for a replayed effect at ``attempted.key``, with the receipt it names.

        ``signature``: the function's earlier signatures in this run, for the error of a changed input.
        """
        run = self.run
        rec = run.recorded
        key = attempted.key
        intent = rec.intents.get(key)
        receipt = rec.receipts.get(key)
        try:
            action = decide_effect(
                run.run_id,
                attempted,
                input_data,
                intent,
                receipt,
                redrivable=redrivable,
                reconcilable=reconcilable,
                signature=signature,
            )
        except UnknownCommitError as exc:
            note(ERROR, run.run_id, key, "run %s: unknown commit at %s: %s", run.run_id, key, exc.args[0])
            raise
        if action is REDRIVE or action is RECONCILE:
            note(
                WARNING,
                run.run_id,
                key,
                "run %s: %s has an intent but no receipt (its driver stopped mid-call); %s",
                run.run_id,
                key,
                "calling it again" if action is REDRIVE else "asking its reconcile= function",
                action=str(action.value),
            )
        if action is RERUN:
            rec.forget(key)
            action = EXECUTE
        if action is EXECUTE and intent is None:
            self.check_position(attempted)
        return action, receipt

    def recorded(self, index: dict[str, Json], attempted: Call) -> Json | None:
        """The record of a value, sleep, answer or session at ``attempted.key``, or ``None``.

        ``None`` means the call executes; it is checked against what the log
        holds at the call's position first.
        """
        run = self.run
        if not run.replaying:
            return None
        got = index.get(attempted.key)
        if got is None:
            self.check_position(attempted)
        return got

    def check_position(self, attempted: Call) -> None:
        """Raise ``NondeterminismError`` if the log recorded another call at this position."""
        run = self.run
        if run.replaying:
            scope = self.scope
            check_position(
                run.run_id, scope.path, self.n, run.recorded.position(scope.path, self.n), attempted
            )
