"""Retry policies: what ``retry=`` accepts, and the decision after a failed attempt.

Deciding is tenacity's job: a policy is a ``stop``, a ``wait`` and a
``retry`` object of tenacity's, asked with a ``RetryCallState`` that the
engine fills from the log (attempt number, time since the first attempt,
time already spent backing off). Looping and sleeping stay in the engine,
so each decision is logged and each backoff sleep is durable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tenacity
from tenacity import RetryCallState
from tenacity.retry import retry_base, retry_if_exception_type, retry_if_not_exception_type
from tenacity.stop import stop_after_attempt
from tenacity.wait import wait_exponential, wait_fixed

from ..errors import ConfigurationError

ExceptionTypes = type[BaseException] | tuple[type[BaseException], ...]

_BUNDLE_KEYS = ("stop", "wait", "retry")


def _exception_types(value: Any, what: str) -> tuple[type[BaseException], ...]:
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise ConfigurationError(
                f"RetryPolicy {what}= takes an exception type or a tuple of them, not {value!r}."
            )
    return items


class RetryPolicy:
    """How often and how patiently a step, tool or model call is tried again.

    A small front for tenacity: it builds tenacity's ``stop``, ``wait`` and
    ``retry`` objects, and the engine asks them after each failed attempt.
    ``retry=`` on ``@step``, ``@tool`` and ``@model_call`` takes a policy, a
    mapping ``{"stop": ..., "wait": ..., "retry": ...}`` of tenacity objects,
    or a ``tenacity.Retrying`` / ``AsyncRetrying`` object (its stop, wait and
    retry are used; its sleep is replaced by the durable backoff).

    Args:
        max_attempts: Attempts in all, the first one included (``>= 1``).
        backoff: Seconds between attempts (a number), or any tenacity wait,
            e.g. ``tenacity.wait_exponential(multiplier=1, max=30)``. The
            default doubles from 0.5 s up to 30 s.
        retry_on: Exception types that are retried (default: any ``Exception``).
        give_up_on: Exception types that are never retried, even when they
            match ``retry_on``.

    Raises:
        ConfigurationError: An argument that cannot work, found at once.

    Example:
        >>> import durable
        >>> @durable.tool(idempotent=True, retry=durable.RetryPolicy(max_attempts=5, backoff=2))
        ... async def charge(order_id: str) -> str:
        ...     return "ok"
        >>> RetryPolicy(max_attempts=2, backoff=0).describe().split()[0]
        'stop=stop_after_attempt(max_attempt_number=2)'
    """

    __slots__ = ("retry", "stop", "wait")

    def __init__(
        self,
        max_attempts: int = 3,
        backoff: float | Callable[[RetryCallState], float] | None = None,
        retry_on: ExceptionTypes = Exception,
        give_up_on: ExceptionTypes = (),
    ):
        if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise ConfigurationError(f"RetryPolicy max_attempts= must be an int >= 1, not {max_attempts!r}.")
        if backoff is None:
            wait: Callable[[RetryCallState], float] = wait_exponential(multiplier=0.5, max=30)
        elif isinstance(backoff, int | float) and not isinstance(backoff, bool):
            if not math.isfinite(backoff) or backoff < 0:
                raise ConfigurationError(
                    f"RetryPolicy backoff= must be a finite number >= 0, not {backoff!r}."
                )
            wait = wait_fixed(backoff)
        elif callable(backoff):
            wait = backoff
        else:
            raise ConfigurationError(
                f"RetryPolicy backoff= takes seconds or a tenacity wait object, not {backoff!r}."
            )
        retry: retry_base = retry_if_exception_type(_exception_types(retry_on, "retry_on"))
        never = _exception_types(give_up_on, "give_up_on")
        if never:
            retry = retry & retry_if_not_exception_type(never)
        self.stop: Callable[[RetryCallState], bool] = stop_after_attempt(max_attempts)
        self.wait = wait
        self.retry: Callable[[RetryCallState], bool] = retry

    @classmethod
    def from_tenacity(
        cls,
        *,
        stop: Callable[[RetryCallState], bool] | None = None,
        wait: Callable[[RetryCallState], float] | None = None,
        retry: Callable[[RetryCallState], bool] | None = None,
    ) -> RetryPolicy:
        """A policy of tenacity's own objects; each one left out takes the default above.

        Args:
            stop: When to give up, e.g. ``tenacity.stop_after_attempt(5)``.
            wait: How long to back off, e.g. ``tenacity.wait_random(1, 3)``.
            retry: Which failures are retried, e.g. ``tenacity.retry_if_exception_type(OSError)``.

        Raises:
            ConfigurationError: One of them is not callable.
        """
        policy = cls()
        for name, value in (("stop", stop), ("wait", wait), ("retry", retry)):
            if value is not None:
                if not callable(value):
                    raise ConfigurationError(
                        f"retry {name}= takes a tenacity {name} object (a callable of the retry "
                        f"state), not {value!r}."
                    )
                setattr(policy, name, value)
        return policy

    def describe(self) -> str:
        """A stable text of the policy, for the run manifest (drift detection)."""
        return f"stop={_describe(self.stop)} wait={_describe(self.wait)} retry={_describe(self.retry)}"

    def __repr__(self) -> str:
        return f"RetryPolicy({self.describe()})"


def _describe(obj: Any, depth: int = 0) -> str:
    if depth > 4:
        return "..."
    if isinstance(obj, type):
        return obj.__qualname__
    if isinstance(obj, tuple | list):
        return "(" + ", ".join(_describe(o, depth + 1) for o in obj) + ")"
    if isinstance(obj, int | float | str | bool) or obj is None:
        return repr(obj)
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '')}.{obj.__qualname__}"
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict):
        inner = ", ".join(f"{k}={_describe(v, depth + 1)}" for k, v in sorted(fields.items()))
        return f"{type(obj).__name__}({inner})"
    return type(obj).__qualname__


def as_policy(value: Any) -> RetryPolicy | None:
    """Normalize what ``retry=`` was given into a ``RetryPolicy`` (at decoration time).

    Raises:
        ConfigurationError: ``value`` is none of the accepted forms.
    """
    if value is None or isinstance(value, RetryPolicy):
        return value
    if isinstance(value, tenacity.BaseRetrying):
        extras = {
            "before": value.before is not tenacity.before_nothing,
            "after": value.after is not tenacity.after_nothing,
            "before_sleep": value.before_sleep is not None,
            "retry_error_callback": value.retry_error_callback is not None,
        }
        used = [k for k, v in extras.items() if v]
        if used:
            raise ConfigurationError(
                f"retry= got a tenacity {type(value).__name__} with {', '.join(used)}; durable "
                "logs each decision itself and uses only stop, wait and retry. Drop the callbacks "
                "and read the retry.decision events instead."
            )
        return RetryPolicy.from_tenacity(stop=value.stop, wait=value.wait, retry=value.retry)
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(_BUNDLE_KEYS))
        if unknown:
            raise ConfigurationError(
                f"retry= mapping has unknown keys {unknown}; use 'stop', 'wait' and 'retry' "
                "(tenacity objects), or durable.RetryPolicy(...)."
            )
        return RetryPolicy.from_tenacity(**value)
    raise ConfigurationError(
        f"retry= takes durable.RetryPolicy(...), a mapping of tenacity stop/wait/retry objects, "
        f"or a tenacity Retrying object, not {value!r}."
    )


@dataclass(frozen=True)
class Decision:
    """What the policy decided after a failed attempt.

    Attributes:
        retry: Whether another attempt follows.
        backoff: Seconds to wait before it (0 when giving up).
    """

    retry: bool
    backoff: float


class _Bundle(tenacity.Retrying):
    """The retrying object a ``RetryCallState`` points to (never run itself)."""


def decide(
    policy: RetryPolicy,
    exc: BaseException,
    *,
    attempt: int,
    first_attempt_at: float,
    now: float,
    idle_for: float,
) -> Decision:
    """Ask the policy's tenacity objects about one failed attempt, in tenacity's order.

    Args:
        policy: The call's policy.
        exc: The attempt's exception.
        attempt: The failed attempt's number (1 for the first).
        first_attempt_at: Clock time the first attempt began (for delay-based stops).
        now: Clock time of the failure.
        idle_for: Seconds already spent backing off (recorded decisions).

    Returns:
        The decision; ``backoff`` is finite and ``>= 0``.
    """
    state = RetryCallState(_Bundle(stop=policy.stop, wait=policy.wait, retry=policy.retry), None, (), {})
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, exc.__traceback__))
    state.start_time = first_attempt_at
    state.outcome_timestamp = now
    state.idle_for = idle_for
    if not policy.retry(state):
        return Decision(False, 0.0)
    backoff = float(policy.wait(state))
    if not math.isfinite(backoff) or backoff < 0:
        backoff = 0.0
    state.upcoming_sleep = backoff
    if policy.stop(state):
        return Decision(False, 0.0)
    return Decision(True, backoff)
