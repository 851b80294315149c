"""Scopes for code that a framework runs: re-entered by key, or a session held open without ``async with``.

``durable.branch`` gives a block of code a scope of its own, used once.
Frameworks call back into an integration at times the integration does not
choose, and an integration needs two more shapes of scope for them:

- ``keyed(name, key)``: the scope ``name[key]`` below the current one,
  created on first use and entered again on every later use, its calls
  numbered on from where the last use stopped. The calls one framework object
  makes over a run (a conversation store's reads and writes, a graph task's
  model calls) get keys that do not depend on what else ran in between.
- ``hold_session(role, ...)``: ``durable.session`` opened and closed by plain
  function calls, for a framework whose loop runs in a task it spawns from a
  sync call (a streamed agent run): the session takes its position, records
  its manifest durably at once, and hands back its scope for that task; its
  end is recorded when ``close`` is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ._claim import Claim
from ._context import CURRENT, NOTHING, Scope, check_awaited
from ._sessions import CURRENT_SESSION, Session, _close, opened_at, session_slot


def keyed_scope(scope: Scope, name: str, key: str) -> Scope:
    """The scope ``name[key]`` below ``scope``: made on first use, the same one afterwards."""
    children = scope.keyed
    if children is None:
        children = scope.keyed = {}
    seg = f"{name}\0{key}"
    child = children.get(seg)
    if child is None:
        child = children[seg] = scope.child_branch(name, key)
    return child


@contextmanager
def keyed(name: str, key: str) -> Iterator[Scope | None]:
    """Make the enclosed durable calls in the scope ``name[key]`` of the current scope, re-entered.

    Outside a run it changes nothing (and yields ``None``). Calls in one keyed
    scope must not run at the same time, as in any scope.
    """
    scope = CURRENT.get()
    if scope is None:
        yield None
        return
    child = keyed_scope(scope, name, key)
    with entered(child):
        yield child


@contextmanager
def entered(scope: Scope) -> Iterator[None]:
    """Make ``scope`` the current one for the enclosed code (and the tasks it starts)."""
    token = CURRENT.set(scope)
    scope.run.active += 1
    try:
        yield
    finally:
        scope.run.active -= 1
        CURRENT.reset(token)


class HeldSession:
    """A session opened by ``hold_session``: its scope for the framework's task, and its end.

    Attributes:
        session: The open ``Session`` (what ``async with durable.session(...)`` yields).
        scope: The session's scope: make it current where its calls run (``entered``).
        resumed: The session was in the log when it opened: a resume replays it.
    """

    __slots__ = ("_closed", "_traced", "resumed", "scope", "session")

    def __init__(self, session: Session, scope: Scope, traced: Any, *, resumed: bool = False) -> None:
        self.session = session
        self.scope = scope
        self.resumed = resumed
        self._traced = traced
        self._closed = False
        scope.run.active += 1  # its calls run beside the caller's: flushes are grouped

    @contextmanager
    def current(self) -> Iterator[None]:
        """Make the session and its scope current for the enclosed code (and tasks started there)."""
        token = CURRENT.set(self.scope)
        stoken = CURRENT_SESSION.set(self.session)
        try:
            yield
        finally:
            CURRENT_SESSION.reset(stoken)
            CURRENT.reset(token)

    def close(self, error: BaseException | None = None) -> None:
        """End the session: its end is recorded when its work finished (``error`` is ``None``).

        A second call does nothing. A session that stopped on an error records
        no end, as ``async with durable.session(...)`` does not.
        """
        if self._closed:
            return
        self._closed = True
        run = self.scope.run
        run.active -= 1
        try:
            if error is None:
                if self.scope.last is not NOTHING:
                    check_awaited(self.scope, f"session {self.session.role!r}")
                _close(run, self.session)
                run.flush_soon()
        finally:
            if self._traced is not None:
                self._traced.end(error)


def hold_session(
    role: str,
    *,
    tools: Iterable[Any] = (),
    workflows: Iterable[Any] = (),
    model_slot: str | None = None,
) -> HeldSession | None:
    """Open ``durable.session(role, ...)`` in the current scope from sync code; ``None`` outside a run.

    The session takes the next position of the current scope now, and its
    manifest is durable (or checked against the recorded one) before this
    returns, as when ``async with durable.session(...)`` is entered.

    Raises:
        CapabilityDriftError: A resume found another manifest.
        ConfigurationError: A bad role or model slot.
    """
    slot = session_slot(role, model_slot)
    scope = CURRENT.get()
    if scope is None:
        return None
    run = scope.run
    with Claim(scope, f"session {role!r}") as claim:
        opened, resumed = opened_at(claim, role, slot, tools, workflows)
        run.flush()  # the manifest is durable before the session does anything
    path = opened.path or ""
    traced = None if run.tracer is None else run.tracer.start_session(role, run.run_id, path, resumed)
    return HeldSession(opened, Scope(run, path), traced, resumed=resumed)
