"""The one decorator factory behind ``@workflow``, ``@step``, ``@tool`` and ``@model_call``.

A decorated function becomes a ``DurableFunction``: a ``wrapt.ObjectProxy``
around the original, so name, docstring, signature, ``inspect`` and type
checkers see the original. Outside a run a call goes straight to the
original (one context-variable read is the whole cost); inside a run it goes
to the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt

from ._context import CURRENT
from ._dispatch import dispatch, route
from ._sessions import session_step_body
from ._spec import Spec, unwrap, validate
from .errors import ConfigurationError

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
        if CURRENT.get() is None:
            return self._self_fn(*args, **kwargs)
        return dispatch(self._self_spec, self._self_fn, args, kwargs)

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

    def __call__(self: DurableFunction, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return fn(*args, **kwargs)
        return handler(spec, fn, args, kwargs)

    return type("DurableFunction", (DurableFunction,), {"__call__": __call__, "__module__": "durable"})


def make_decorator(kind: str, fn: Any, options: dict[str, Any]) -> Any:
    """Apply ``@kind(**options)`` to ``fn``, or return the decorator when ``fn`` is ``None``."""

    def decorate(f: Any) -> Any:
        target, binding = unwrap(kind, f)
        opts = {k: v for k, v in options.items() if v is not None}
        session_opts = {k: opts.pop(k) for k in _SESSION_OPTIONS if k in opts}
        validate(kind, target, opts)
        spec = Spec(kind, target, binding, **opts)
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
