"""Durable errors carried through framework code that turns every ``Exception`` into data.

Agent frameworks catch ``Exception`` around a tool call (the error becomes a
message to the model) or wrap it in an error of their own. A durable error
raised there (an unknown commit, a replay that left the log's path, a spent
budget) is no outcome of the tool: the run must stop on it. An integration
raises it as ``Carried(error)``, a ``DurableControl`` that ``except
Exception`` lets through; the runner (or the integration's outermost call)
raises the error itself again, so the run ends exactly as if the error had
been raised directly.
"""

from __future__ import annotations

from ..errors import DurableControl, DurableError
from ._failures import recordable


class Carried(DurableControl):
    """A durable error on its way through framework code (see the module's docstring).

    Attributes:
        error: The error the run must end on.
    """

    def __init__(self, error: BaseException):
        super().__init__(str(error), run_id=getattr(error, "run_id", None))
        self.error = error


def carried(exc: BaseException) -> BaseException:
    """``exc`` made to pass framework code: a durable error that is no call's outcome, carried.

    A recorded failure rebuilt on a replay (``StepFailedError``,
    ``NonRetryableError``, ``StepTimeoutError``) is the call's own outcome and
    is returned unchanged, as is any other exception.
    """
    if isinstance(exc, DurableError) and not recordable(exc):
        return Carried(exc)
    return exc


def durable_cause(exc: BaseException) -> BaseException | None:
    """The durable error (or control signal) ``exc`` stands for, or ``None``.

    Looks at ``exc`` and down its ``__cause__`` / ``__context__`` chain: a
    framework that wraps a tool's error in its own (``raise UserError(...) from
    e``) still ends the run on the durable error inside. A ``Carried`` gives
    its ``error``.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, Carried):
            return cur.error
        if isinstance(cur, DurableControl) or (isinstance(cur, DurableError) and not recordable(cur)):
            return cur
        cur = cur.__cause__ if cur.__cause__ is not None else cur.__context__
    return None
