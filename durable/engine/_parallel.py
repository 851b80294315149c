"""Concurrency with stable identities: ``parallel`` and ``branch``.

Each concurrent piece of work gets its own scope ``name[key]``, so its calls
have paths that do not depend on which piece finishes first.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ..errors import ConfigurationError, NondeterminismError
from ..events import FANOUT_STARTED
from . import _event_writer as ev
from ._context import CURRENT, NOTHING, Scope, check_awaited
from ._keys import fanout_key

T = TypeVar("T")
R = TypeVar("R")


async def _call(fn: Callable[[T], Awaitable[R] | R], item: T) -> R:
    out = fn(item)
    if inspect.isawaitable(out):
        return await out
    return out


async def parallel(
    name: str,
    items: Iterable[T],
    fn: Callable[[T], Awaitable[R] | R],
    *,
    key: Callable[[T], Any],
    limit: int | None = None,
) -> list[R]:
    """Run ``fn(item)`` for every item, each in its own branch scope ``name[key(item)]``.

    Every branch runs to its end and commits before the first failure (in
    item order) is raised, so a resume never loses a finished branch.

    Args:
        name: The fan-out's name, the first part of each branch path.
        items: The items; ``key(item)`` must be unique among them.
        fn: An async (or sync) callable, usually a ``@step``.
        key: Gives each item's stable branch key.
        limit: At most this many branches run at once.

    Returns:
        The results, in item order.

    Example:
        >>> import asyncio, durable
        >>> @durable.step
        ... async def double(x: int) -> int:
        ...     return 2 * x
        >>> @durable.workflow
        ... async def wf(xs: list[int]) -> list[int]:
        ...     return await durable.parallel("double", xs, double, key=str)
        >>> asyncio.run(durable.run_workflow(wf, [1, 2], world=durable.memory_world()))
        [2, 4]
    """
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ConfigurationError(f"parallel limit must be an int >= 1 or None, not {limit!r}.")
    items = list(items)
    sem = asyncio.Semaphore(limit) if limit else None
    scope = CURRENT.get()
    if scope is None:

        async def plain(item: T) -> R:
            if sem is None:
                return await _call(fn, item)
            async with sem:
                return await _call(fn, item)

        return list(await asyncio.gather(*(plain(i) for i in items)))

    keys = [str(key(i)) for i in items]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ConfigurationError(
            f"parallel {name!r}: key {dup!r} is given by more than one item; keys must be unique."
        )
    run = scope.run
    _record_fanout(scope, name, keys)
    children = [scope.child_branch(name, k) for k in keys]

    async def one(item: T, child: Scope) -> R:
        CURRENT.set(child)  # this task's own context copy
        try:
            if sem is None:
                out = await _call(fn, item)
            else:
                async with sem:
                    out = await _call(fn, item)
            if child.last is not NOTHING:
                check_awaited(child, f"branch {child.path!r}")
            return out
        finally:
            run.active -= 1

    run.active += len(items)
    results = await asyncio.gather(
        *(one(i, c) for i, c in zip(items, children, strict=True)), return_exceptions=True
    )
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]


def _record_fanout(scope: Scope, name: str, keys: list[str]) -> None:
    """Check a fan-out against the recorded one at its place, or record it."""
    m = scope.fanouts
    scope.fanouts = m + 1
    path = fanout_key(scope.prefix, m)
    run = scope.run
    recorded = run.recorded.fanouts.get(path) if run.replaying else None
    if recorded is None:
        run.emit(FANOUT_STARTED, ev.fanout_started(path, name, keys))
        return
    if recorded["name"] != name or recorded["keys"] != keys:
        old, new = recorded["keys"], keys
        raise NondeterminismError(
            f"run {run.run_id!r}: fan-out {m} of scope {scope.path or '<workflow>'!r} was recorded as "
            f"parallel({recorded['name']!r}) with keys {old!r}, and now runs as parallel({name!r}) with "
            f"keys {new!r}. Branches are identified by their keys, so a changed key function, "
            "fan-out name or item list would run every branch again, side effects included. "
            "Restore the code and items the run was started with and resume, or start a new run id.",
            run_id=run.run_id,
            path=path,
            recorded={"name": recorded["name"], "keys": old},
            attempted={"name": name, "keys": new},
        )


@asynccontextmanager
async def branch(key: Any, *, name: str = "") -> AsyncIterator[None]:
    """Give the enclosed durable calls their own scope ``name[key]`` (``[key]`` by default).

    Use it where code runs concurrent calls itself, e.g. with ``asyncio.gather``
    over the tool calls of one model turn, keyed by ``tool_call_id``.

    Example:
        >>> import asyncio, durable
        >>> @durable.tool
        ... async def look(q: str) -> str:
        ...     return q.upper()
        >>> async def one(call_id: str, q: str) -> str:
        ...     async with durable.branch(call_id):
        ...         return await look(q)
        >>> @durable.workflow
        ... async def wf() -> list[str]:
        ...     return list(await asyncio.gather(one("c1", "a"), one("c2", "b")))
        >>> asyncio.run(durable.run_workflow(wf, world=durable.memory_world()))
        ['A', 'B']
    """
    scope = CURRENT.get()
    if scope is None:
        yield
        return
    child = scope.child_branch(name, str(key))
    token = CURRENT.set(child)
    scope.run.active += 1
    try:
        yield
        if child.last is not NOTHING:
            check_awaited(child, f"branch {child.path!r}")
    finally:
        scope.run.active -= 1
        CURRENT.reset(token)
