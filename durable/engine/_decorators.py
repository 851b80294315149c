"""``@workflow``, ``@step``, ``@tool`` and ``@model_call``, and the one factory behind them.

A decorated function becomes a ``DurableFunction``: a ``wrapt.ObjectProxy``
around the original, so name, docstring, signature, ``inspect`` and type
checkers see the original. Outside a run a call goes straight to the
original (one context-variable read is the whole cost); inside a run it goes
to the engine.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

import wrapt

from ..errors import ConfigurationError
from ._context import CURRENT, hold, made
from ._dispatch import dispatch, route
from ._outbox_call import register as register_outbox_tool
from ._sessions import session_step_body
from ._spec import Spec, unwrap, validate

_SESSION_OPTIONS = ("tools", "workflows", "model_slot")


class DurableFunction(wrapt.ObjectProxy):  # type: ignore[type-arg]
    """A decorated function: the original outside a run, durable inside one."""

    def __init__(self, wrapped: Callable[..., Any], spec: Spec, instance: Any = None):
        super().__init__(wrapped)
        self._self_spec = spec
        self._self_instance = instance
        self._self_fn = wrapped

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        spec: Spec = self._self_spec
        if spec.binding == "classmethod":
            target = owner if owner is not None else type(instance)
            return DurableFunction(self._self_fn.__get__(target, owner), spec, target)
        if instance is None or spec.binding == "function":
            return self
        return DurableFunction(self._self_fn.__get__(instance, owner), spec, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Reading the context variable is the only cost outside a run.
        scope = CURRENT.get()
        if scope is None:
            return self._self_fn(*args, **kwargs)
        out = dispatch(self._self_spec, self._self_fn, args, kwargs)
        if inspect.iscoroutine(out):
            made(scope, out, sys._getframe(1))
        return out

    def __repr__(self) -> str:
        return f"<durable {self._self_spec.kind} {self._self_spec.name!r} of {self.__wrapped__!r}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("durable functions are not picklable")


def _fast_class(fn: Callable[..., Any], spec: Spec) -> type[DurableFunction]:
    """A subclass whose ``__call__`` closes over ``fn`` and ``spec``.

    Outside a run a call then costs one context-variable read more than the
    undecorated function: no attribute lookups on the proxy.
    """
    current = CURRENT.get
    handler = route(spec)
    if not inspect.iscoroutinefunction(handler):  # sync calls, streams: nothing to await

        def __call__(self: DurableFunction, *args: Any, **kwargs: Any) -> Any:
            if current() is None:
                return fn(*args, **kwargs)
            return handler(spec, fn, args, kwargs)

        return type("DurableFunction", (DurableFunction,), {"__call__": __call__, "__module__": "durable"})
    getframe = sys._getframe
    keep = hold

    def tracked_call(self: DurableFunction, *args: Any, **kwargs: Any) -> Any:
        scope = current()
        if scope is None:
            return fn(*args, **kwargs)
        coro = handler(spec, fn, args, kwargs)
        # _context.made, inlined: the scope remembers the coroutine and where it was made,
        # so a body that returns without awaiting it fails (check_awaited).
        if scope.last[0].cr_frame is not None:
            keep(scope, scope.last)
        frame = getframe(1)
        scope.last = (coro, frame, frame.f_lineno)
        return coro

    return type("DurableFunction", (DurableFunction,), {"__call__": tracked_call, "__module__": "durable"})


def make_decorator(kind: str, fn: Any, options: dict[str, Any]) -> Any:
    """Apply ``@kind(**options)`` to ``fn``, or return the decorator when ``fn`` is ``None``."""

    def decorate(f: Any) -> Any:
        target, binding = unwrap(kind, f)
        opts = {k: v for k, v in options.items() if v is not None}
        session_opts = {k: opts.pop(k) for k in _SESSION_OPTIONS if k in opts}
        validate(kind, target, opts)
        spec = Spec(kind, target, binding, **opts)
        if spec.outbox:
            register_outbox_tool(spec)
        if spec.role is None:
            if session_opts:
                raise ConfigurationError(
                    f"@{kind} {spec.name!r}: {', '.join(sorted(session_opts))} describe a session; "
                    "add role=... to make the step a session."
                )
            return _fast_class(target, spec)(target, spec)
        # The step's body runs as a session at the step's own path.
        body = session_step_body(target, spec.role, **session_opts)
        durable_fn = _fast_class(body, spec)(target, spec)
        durable_fn._self_fn = body
        return durable_fn

    if fn is None:
        return decorate
    return decorate(fn)


P = ParamSpec("P")
R = TypeVar("R")


@overload
def workflow(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def workflow(
    *,
    name: str | None = None,
    version: str | int | None = None,
    uses: list[Any] | None = None,
    max_recovery_attempts: int | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def workflow(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    uses: list[Any] | None = None,
    max_recovery_attempts: int | None = None,
) -> Any:
    """Mark a function as a workflow: the body of a durable run.

    Run it with ``run_workflow``. Called inside another run it starts a child
    run with its own log. Called outside any run it is the plain function.

    Args:
        fn: The function (when used bare, ``@workflow``).
        name: The workflow's name in the log (default: the function's name).
        version: A manual drift marker: change it to make resumes fail closed.
        uses: Capabilities (tools, model calls, steps, workflows) the manifest covers.
        max_recovery_attempts: Recoveries of one run (drives cut because its worker died)
            before the run is ``blocked`` with reason ``recovery_exhausted``; it wins over
            the worker's ``Worker(max_recovery_attempts=...)``. Not part of the manifest.
    """
    return make_decorator(
        "workflow",
        fn,
        {"name": name, "version": version, "uses": uses, "max_recovery_attempts": max_recovery_attempts},
    )


@overload
def step(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def step(
    *,
    name: str | None = None,
    version: str | int | None = None,
    max_visits: int = 1,
    retry: Any = None,
    timeout: float | None = None,
    role: str | None = None,
    tools: list[Any] | None = None,
    workflows: list[Any] | None = None,
    model_slot: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def step(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    max_visits: int = 1,
    retry: Any = None,
    timeout: float | None = None,
    role: str | None = None,
    tools: list[Any] | None = None,
    workflows: list[Any] | None = None,
    model_slot: str | None = None,
) -> Any:
    """Mark a function as a step: the unit of memoization.

    Inside a run a committed step's output is never recomputed. A step may be
    entered ``max_visits`` times per scope (decision loops); each visit gets
    the path suffix ``.visit[k]`` when ``max_visits > 1``.

    Args:
        fn: The function (when used bare, ``@step``).
        name: The step's name in paths (default: the function's name).
        version: A manual drift marker.
        max_visits: How many times the step may be entered in one scope.
        retry: A ``RetryPolicy`` or tenacity ``stop``/``wait``/``retry`` objects.
        timeout: Seconds one attempt of an async step may take; a longer one fails
            with ``StepTimeoutError``, which ``retry=`` may retry. Refused on a sync step.
        role: Makes the step an agent session with this role (see ``durable.session``).
        tools: With ``role``: the ``@tool`` functions the session offers.
        workflows: With ``role``: the ``@workflow`` functions the session may start.
        model_slot: With ``role``: the session's model slot (default: the role).
    """
    return make_decorator(
        "step",
        fn,
        {
            "name": name,
            "version": version,
            "max_visits": max_visits,
            "retry": retry,
            "timeout": timeout,
            "role": role,
            "tools": tools,
            "workflows": workflows,
            "model_slot": model_slot,
        },
    )


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    version: str | int | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None,
    retry: Any = None,
    outbox: bool = False,
    compensate: Any = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def tool(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], Any] | None = None,
    retry: Any = None,
    outbox: bool = False,
    compensate: Any = None,
) -> Any:
    """Mark a function as a tool: an external side effect, bracketed by intent and receipt.

    After a crash between intent and receipt, an ``idempotent=True`` tool is
    called again with the same ``durable.idempotency_key()``; a tool with
    ``reconcile=fn`` gets ``fn(key, input)`` asked first (return the result,
    or ``durable.NEVER_HAPPENED``); any other tool fails closed with
    ``UnknownCommitError``.

    Args:
        fn: The function (when used bare, ``@tool``).
        name: The tool's name in effect keys.
        version: A manual drift marker.
        idempotent: Safe to call again with the same idempotency key.
        reconcile: Asked after an unknown commit whether the effect happened.
        retry: A ``RetryPolicy`` or tenacity ``stop``/``wait``/``retry`` objects.
        outbox: Inside a run, record the call and an outbox entry in one
            transaction and return an ``OutboxRef`` at once, without calling
            the body: a worker's dispatcher calls it after the commit, with
            the same idempotency key on every attempt, under ``retry=`` (by
            default 5 attempts), and moves an entry that runs out of attempts
            to the dead letter. The call's result is not returned to the run.
        compensate: An async ``@tool`` that undoes a confirmed call: when the run
            fails for good or is cancelled, it is called with the call's
            original arguments and ``result=`` its recorded result, newest
            call first, each a durable effect keyed ``compensate:<key>``.
    """
    return make_decorator(
        "tool",
        fn,
        {
            "name": name,
            "version": version,
            "idempotent": idempotent,
            "reconcile": reconcile,
            "retry": retry,
            "outbox": outbox,
            "compensate": compensate,
        },
    )


@overload
def model_call(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def model_call(
    *,
    name: str | None = None,
    version: str | int | None = None,
    slot: str | None = None,
    retry: Any = None,
    stream_to: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def model_call(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    slot: str | None = None,
    retry: Any = None,
    stream_to: str | None = None,
) -> Any:
    """Mark a function as a model call: an external read whose response is recorded.

    A replay returns the recorded response; a call cut by a crash is issued
    again. ``slot`` names the model slot that ``run_workflow(models=...)`` maps.

    Args:
        fn: The function (when used bare, ``@model_call``).
        name: The call's name in effect keys.
        version: A manual drift marker.
        slot: The model slot, e.g. ``"worker"``.
        retry: A ``RetryPolicy`` or tenacity ``stop``/``wait``/``retry`` objects.
        stream_to: On a streamed call (an async generator), the run's stream
            that each chunk is also written to as it arrives, for
            ``handle.read_stream(stream_to)``. A replay writes nothing again.
    """
    return make_decorator(
        "model",
        fn,
        {"name": name, "version": version, "slot": slot, "retry": retry, "stream_to": stream_to},
    )
