"""Values that differ between executions, recorded once and replayed after.

``now()``, ``uuid4()`` and ``random()`` record what they returned; ``sleep``
records its wake time so a resume waits only for what is left;
``interrupt`` suspends the run until an answer is given. Outside a run each
behaves like its ordinary counterpart (``interrupt`` needs a run).
"""

from __future__ import annotations

import asyncio
import dis
import math
import random as _random
import sys
import uuid as _uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from types import CodeType
from typing import Any

from ..errors import ConfigurationError, NondeterminismError, RunInterrupted
from ..events import TIMER_SET, VALUE_RECORDED
from . import _event_writer as ev
from ._claim import Claim
from ._context import CURRENT, Scope, current_scope
from ._decide import Call
from ._keys import value_key
from ._values import ANY, to_json


def _seconds(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise ConfigurationError(f"durable.sleep() takes a number of seconds, not {seconds!r}.")
    if math.isinf(seconds):
        raise ConfigurationError("durable.sleep() cannot sleep forever; use durable.interrupt() to wait.")
    return max(0.0, float(seconds))


def record_value(kind: str, produce: Callable[[], Any]) -> Any:
    """``produce()`` recorded once as a value of ``kind`` in the current scope, replayed after.

    Outside a run it is ``produce()``. The value must be JSON; an integration
    records with it what a framework draws at random (a graph's checkpoint ids).
    """
    scope = CURRENT.get()
    if scope is None:
        return produce()
    with Claim(scope, f"durable.{kind}()") as claim:
        key = value_key(scope.prefix, kind, claim.n)
        got = claim.recorded(claim.run.recorded.values, Call(kind, kind, "", key))
        if got is not None:
            return got["value"]
        value = produce()
        claim.run.emit(VALUE_RECORDED, ev.value_recorded(key, kind, value, claim.n))
        claim.run.flush_soon()
        return value


def now() -> datetime:
    """The current UTC time; inside a run, recorded once and replayed on resume.

    Example:
        >>> now().tzinfo is not None
        True
    """
    scope = CURRENT.get()
    clock = scope.run.clock if scope is not None else None
    stamp = record_value("now", clock if clock is not None else lambda: datetime.now(UTC).timestamp())
    return datetime.fromtimestamp(stamp, UTC)


def uuid4() -> _uuid.UUID:
    """A random UUID; inside a run, recorded once and replayed on resume."""
    return _uuid.UUID(record_value("uuid4", lambda: _uuid.uuid4().hex))


def random() -> float:
    """A random float in [0, 1); inside a run, recorded once and replayed on resume."""
    return float(record_value("random", _random.random))


async def sleep(seconds: float) -> None:
    """Sleep durably: the wake time is recorded, so a resume sleeps only the rest.

    Args:
        seconds: How long to sleep (negative counts as zero).
    """
    scope = CURRENT.get()
    if scope is None:
        await asyncio.sleep(_seconds(seconds))
        return
    delay = _seconds(seconds)
    run = scope.run
    with Claim(scope, "durable.sleep()") as claim:
        key = value_key(scope.prefix, "sleep", claim.n)
        timer = claim.recorded(run.recorded.timers, Call("sleep", "sleep", "", key))
        if timer is not None:
            wake = float(timer["wake_at"])
        else:
            wake = run.clock() + delay
            run.emit(TIMER_SET, ev.timer_set(key, wake, claim.n))
            await run.flush_async()
        remaining = wake - run.clock()
        if remaining > 0:
            await run.pause(remaining)


def interrupt(value: Any = None) -> Any:
    """Suspend the run until someone answers; return the answer once given.

    The first time, this records ``interrupt`` and the run ends with
    ``RunInterrupted`` (carrying ``value`` and the run id). A later
    ``run_workflow(..., run_id=..., resume=answer)`` records the answer, the
    body re-executes, and this call returns ``answer``.

    Args:
        value: What the run asks (JSON through pydantic), e.g. a draft to approve.

    Returns:
        The answer given with ``resume=``.

    Raises:
        ConfigurationError: Outside a run, or the call is awaited (``await
            durable.interrupt(...)``): the answer is no coroutine, so the
            resume that answers it would fail; this says so on the first drive.
    """
    scope: Scope = current_scope("durable.interrupt()")
    run = scope.run
    caller = sys._getframe(1)
    if _awaited(caller.f_code, caller.f_lasti):
        raise ConfigurationError(
            f"run {run.run_id!r}: durable.interrupt() is not awaited: remove the await at "
            f"{caller.f_code.co_filename}:{caller.f_lineno}. It returns the answer itself "
            "(`answer = durable.interrupt(value)`); awaited, the run would wait for an answer, "
            "then fail on the resume that gives it. Nothing was recorded.",
            run_id=run.run_id,
            path=scope.path or None,
        )
    with Claim(scope, "durable.interrupt()") as claim:
        key = value_key(scope.prefix, "interrupt", claim.n)
        rec = run.recorded
        answer = rec.answers.get(key)
        if answer is not None:
            return answer["value"]
        if rec.terminal is not None:  # pragma: no cover - guarded by the runner
            raise NondeterminismError("interrupt reached in a finished run", run_id=run.run_id)
        data = to_json(ANY, value, what="the interrupt value", run_id=run.run_id, path=key)
        if claim.recorded(rec.interrupts, Call("interrupt", "interrupt", "", key)) is None:
            run.record("interrupt", ev.interrupt(key, data, claim.n))
        raise RunInterrupted(
            f"run {run.run_id!r} waits at {key!r} for an answer; call run_workflow again with "
            "the same run_id and resume=<answer>.",
            run_id=run.run_id,
            value=data,
            path=key,
        )


@lru_cache(maxsize=256)
def _awaited(code: CodeType, lasti: int) -> bool:
    """Whether the call that runs at ``lasti`` of ``code`` is awaited: its next instruction awaits.

    ``lasti`` is the call's offset, or (CPython 3.11) that of its last inline
    cache entry, which ``dis`` does not list: the next listed instruction follows either.
    """
    for ins in dis.get_instructions(code):
        if ins.offset > lasti:
            return ins.opname == "GET_AWAITABLE"
    return False
