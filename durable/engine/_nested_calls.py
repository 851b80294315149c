"""Durable calls made inside an effect's body, recorded in a scope of their own below the effect.

A ``@tool`` body is one effect: its intent and receipt bracket whatever it
does. An agent run inside a tool of another agent (a delegate) makes model
and tool calls of its own; recorded in the tool's own scope
(``<tool key>.session:<agent>#0.model:...#1``) they replay when the tool is
called again, so a kill inside the delegate runs again only the call it cut.

An effect whose body recorded such calls is called again after a crash
between its intent and its receipt, or after an interrupt its body raised
(``body_recorded_calls``): its own durable calls make that safe, they
replay and do not run twice. Side effects
of the body that are not durable calls run again; make them tools.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from ._context import CURRENT, EFFECT_KEY, Scope
from ._keys import effect_of_idempotency_key
from ._recorded import Recorded


def in_effect_body() -> bool:
    """Whether the caller runs inside the body of an effect of a durable run."""
    return CURRENT.get() is not None and EFFECT_KEY.get() is not None


@asynccontextmanager
async def effect_body_scope() -> AsyncIterator[None]:
    """Record the durable calls made inside in the running effect's own scope.

    Outside an effect body it changes nothing. Calls made in one effect body,
    one after the other, share that scope and are numbered in call order; two
    at once are refused with ``NondeterminismError``, as in any scope.
    """
    with effect_body_scope_sync():
        yield


@contextmanager
def effect_body_scope_sync() -> Iterator[None]:
    """``effect_body_scope`` for sync code (a framework's sync entry that starts a task of its own)."""
    scope = CURRENT.get()
    idempotency = EFFECT_KEY.get()
    if scope is None or idempotency is None:
        yield
        return
    run = scope.run
    if scope.busy is None:
        # A scope the body opened itself (``durable.branch``): the calls take their keys there,
        # one branch each, and a crash inside fails closed like any unconfirmed tool.
        inner = scope
    else:  # the scope that holds the effect: its calls go below the effect's key
        key = effect_of_idempotency_key(run.run_id, idempotency)
        nested = scope.nested
        if nested is None:
            nested = scope.nested = {}
        below = nested.get(key)
        if below is None:
            below = nested[key] = Scope(run, key)
        inner = below
    current = CURRENT.set(inner)
    effect = EFFECT_KEY.set(None)  # inside, calls are the run's own again
    run.active += 1
    try:
        yield
    finally:
        run.active -= 1
        EFFECT_KEY.reset(effect)
        CURRENT.reset(current)


def body_recorded_calls(rec: Recorded, key: str) -> bool:
    """Whether the log holds durable calls made inside the body of the effect ``key``.

    An interrupt counts: a body that asked a person (``durable.interrupt`` in a
    tool) stopped there, and called again it replays to the answer.
    """
    prefix = key + "."
    return any(k.startswith(prefix) for index in (rec.intents, rec.sessions, rec.interrupts) for k in index)
