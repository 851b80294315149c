"""One durable call around a callback: what every integration records its calls through.

An integration knows at call time what it calls (a model request, a tool
call, an MCP listing) and under which name; durable's decorators take their
name and options at decoration time. ``run_effect`` bridges the two: it keeps
one ``@durable.model_call`` or ``@durable.tool`` per name and options, hands it
the call's identity as its argument (hashed, never stored) and the callback
through a context variable, so the decorated body runs exactly the callback
and its return value (JSON) is what the log records and replays.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Literal

import durable

from ..engine import CURRENT, EFFECT_KEY

_BODY: ContextVar[Callable[[], Any] | None] = ContextVar("durable_integration_body", default=None)

_Reconcile = Callable[[str, dict[str, Any]], Any]
_Undo = Callable[[dict[str, Any], Any], Awaitable[Any]]
_CALLS: dict[tuple[Any, ...], Any] = {}
_UNDOS: dict[tuple[Any, ...], Any] = {}


def in_run() -> bool:
    """Whether a call made here should be recorded: inside a durable run, outside any effect's own call.

    Inside the body of a ``@tool`` or ``@model_call`` (a ``@model_call`` of the
    user's own around a wrapped client, a sub-agent run by a tool) the call is
    part of that effect, which records its outcome, so it runs as it would
    outside a run. A scope of its own inside the body (``durable.branch``, or
    the scope an integration gives a tool's body) records calls again, as the
    engine records ``@tool`` calls made there.
    """
    scope = CURRENT.get()
    if scope is None:
        return False
    return EFFECT_KEY.get() is None or scope.busy is None


def _body() -> Callable[[], Any]:
    body = _BODY.get()
    if body is None:  # pragma: no cover - only the run_* functions below call it
        raise durable.ConfigurationError("an integration's durable call ran without its request.")
    return body


def _function(flavour: str) -> Callable[..., Any]:
    """The body of a decorated call: ``async``, ``sync`` or ``stream`` (an async generator)."""
    if flavour == "sync":

        def call_sync(identity: dict[str, Any]) -> Any:
            return _body()()

        return call_sync
    if flavour == "stream":

        async def call_stream(identity: dict[str, Any]) -> AsyncIterator[Any]:
            async for chunk in _body()():
                yield chunk

        return call_stream

    async def call(identity: dict[str, Any]) -> Any:
        return await _body()()

    return call


def _decorated(
    kind: Literal["model", "tool"],
    name: str,
    idempotent: bool,
    reconcile: _Reconcile | None,
    slot: str | None,
    flavour: str = "async",
    retry: Any = None,
    compensate: Any = None,
) -> Any:
    key = (kind, name, idempotent, reconcile, slot, flavour, retry, compensate)
    fn = _CALLS.get(key)
    if fn is None:
        call = _function(flavour)
        call.__qualname__ = call.__name__ = name
        if kind == "model":
            fn = durable.model_call(name=name, slot=slot, retry=retry)(call)
        else:
            fn = durable.tool(
                name=name,
                idempotent=idempotent,
                reconcile=_unwrapped(reconcile),
                retry=retry,
                compensate=compensate,
            )(call)
        _CALLS[key] = fn
    return fn


def undo_tool(
    name: str,
    undo: _Undo,
    *,
    idempotent: bool = False,
    reconcile: _Reconcile | None = None,
    retry: Any = None,
) -> Any:
    """The ``compensate=`` of ``run_effect``: a ``@durable.tool`` named ``name`` running ``undo``.

    When the run fails for good or is cancelled, the engine calls it for each
    confirmed call, newest first, with the call's identity and ``result=`` its
    recorded JSON result; ``undo(identity, result)`` turns them into the user's
    own arguments. One tool per name, function and options, so a resume builds
    the same one.

    Args:
        name: The compensation's name in effect keys, e.g. ``"openai_agents__undo__refund"``.
        undo: Called with the call's identity (as ``run_effect`` got it) and its result.
        idempotent: Safe to call again after a crash cut it mid-call.
        reconcile: Asked after such a crash whether the undo happened.
        retry: A ``RetryPolicy`` or tenacity objects for the undo itself.
    """
    key = (name, undo, idempotent, reconcile, retry)
    fn = _UNDOS.get(key)
    if fn is None:

        async def compensate(identity: dict[str, Any], result: Any) -> Any:
            return await undo(identity, result)

        compensate.__qualname__ = compensate.__name__ = name
        fn = _UNDOS[key] = durable.tool(
            name=name, idempotent=idempotent, reconcile=_unwrapped(reconcile), retry=retry
        )(compensate)
    return fn


def _unwrapped(reconcile: _Reconcile | None) -> _Reconcile | None:
    """``reconcile`` asked with the call's identity (``{"tool": ..., "args": ...}``), not its wrapper."""
    if reconcile is None:
        return None

    def ask(key: str, inp: dict[str, Any]) -> Any:
        return reconcile(key, inp.get("identity", inp))

    ask.__qualname__ = getattr(reconcile, "__qualname__", "reconcile")
    return ask


async def run_effect(
    kind: Literal["model", "tool"],
    name: str,
    body: Callable[[], Awaitable[Any]],
    *,
    idempotent: bool = False,
    reconcile: _Reconcile | None = None,
    slot: str | None = None,
    retry: Any = None,
    compensate: Any = None,
    **identity: Any,
) -> Any:
    """Run ``body`` as the durable call ``name``; its JSON result is recorded and replayed.

    Args:
        kind: ``"model"`` (a read: reissued after a crash) or ``"tool"`` (an effect).
        name: The call's name in effect keys (usable in a path).
        body: The call itself; it returns JSON data.
        idempotent: For tools: safe to run again with the same idempotency key.
        reconcile: For tools: asked after an unknown commit whether the call happened.
        slot: For model calls: the model slot.
        retry: A ``RetryPolicy`` or tenacity objects: ``body`` is called again after it raised.
        compensate: For tools: an ``undo_tool``, run for the confirmed call when the run fails
            for good or is cancelled.
        **identity: What identifies the call (hashed; a replay must present the same).
    """
    fn = _decorated(kind, name, idempotent, reconcile, slot, retry=retry, compensate=compensate)
    token = _BODY.set(body)
    try:
        return await fn(identity)
    finally:
        _BODY.reset(token)


def run_effect_sync(
    name: str,
    body: Callable[[], Any],
    *,
    kind: Literal["model", "tool"] = "model",
    idempotent: bool = False,
    reconcile: _Reconcile | None = None,
    slot: str | None = None,
    retry: Any = None,
    compensate: Any = None,
    **identity: Any,
) -> Any:
    """``run_effect`` for a call made from sync code (a sync client, a sync tool): ``body`` is plain."""
    fn = _decorated(kind, name, idempotent, reconcile, slot, "sync", retry=retry, compensate=compensate)
    token = _BODY.set(body)
    try:
        return fn(identity)
    finally:
        _BODY.reset(token)


class _Stream:
    """The chunks of a streamed durable model call, with the call's body visible while it runs."""

    def __init__(self, body: Callable[[], AsyncIterator[Any]], gen: AsyncIterator[Any]) -> None:
        self._body = body
        self._gen = gen

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Any:
        token = _BODY.set(self._body)  # the decorated generator opens the body on its first step
        try:
            return await self._gen.__anext__()
        finally:
            _BODY.reset(token)

    async def aclose(self) -> None:
        """Stop reading: the chunks seen so far are the call's recorded outcome."""
        close = getattr(self._gen, "aclose", None)
        if close is not None:
            await close()


def run_stream(
    name: str, body: Callable[[], AsyncIterator[Any]], *, slot: str | None = None, **identity: Any
) -> _Stream:
    """A streamed durable model call: each chunk ``body`` yields (JSON) is recorded and replayed."""
    fn = _decorated("model", name, False, None, slot, "stream")
    return _Stream(body, fn(identity))
