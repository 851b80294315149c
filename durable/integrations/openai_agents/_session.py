"""Conversation sessions inside a run: an SDK ``Session``'s reads and writes recorded like calls.

The runner reads a session's history before the first turn and adds each
turn's items after it. Replayed from the top, a resumed run would read the
items its first execution added and add them again. Inside a run each method
of the session (wrapped in place, once, as any session given to a durable
agent run is) is a recorded call in the scope ``conversation[<session id>]``:
a read replays what the first execution read, a write that committed is not
made again, and a write cut by a crash blocks the run (``unknown_commit``)
rather than risking a duplicate, unless the session writes idempotently by
key, as ``DurableSession`` does.
"""

from __future__ import annotations

import functools
import json
import uuid
from typing import Any

from agents.memory.session import SessionABC

import durable

from ...engine import CURRENT, WorldCore, carried, keyed
from .._effects import in_run, run_effect
from .._manifest import name_part
from ._model import jsonable
from ._names import session_op

WRAPPED = "__durable_wrapped__"
_OPS = ("get_items", "add_items", "pop_item", "clear_session")


def recorded_session(session: Any) -> Any:
    """Make ``session``'s reads and writes recorded calls inside a run (in place, once); return it."""
    if getattr(session.get_items, WRAPPED, False):
        return session
    idempotent = bool(getattr(session, "writes_by_key", False))
    for op in _OPS:
        original = getattr(session, op, None)
        if original is not None:
            setattr(session, op, _recorded(session, op, original, idempotent=idempotent or op == "get_items"))
    return session


def _recorded(session: Any, op: str, original: Any, *, idempotent: bool) -> Any:
    async def call(*args: Any, **kwargs: Any) -> Any:
        if not in_run():
            return await original(*args, **kwargs)
        live: list[Any] = []

        async def body() -> Any:
            out = await original(*args, **kwargs)
            live.append(out)
            return {"value": jsonable(out)}

        try:
            with keyed("conversation", name_part(str(session.session_id))):
                payload = await run_effect(
                    "tool",
                    session_op(op),
                    body,
                    idempotent=idempotent,
                    session=str(session.session_id),
                    args=jsonable(list(args)),
                    kwargs=jsonable(kwargs),
                )
        except durable.DurableError as exc:
            raise carried(exc) from exc
        return live[-1] if live else payload["value"]

    functools.update_wrapper(call, original)
    setattr(call, WRAPPED, True)
    return call


NAMESPACE = "openai_agents.session"
"""The thread store namespace of ``DurableSession``'s items."""


def _call_key() -> str | None:
    """The idempotency key of the durable call this runs in, or ``None`` outside one."""
    try:
        return durable.idempotency_key()
    except durable.ConfigurationError:
        return None


class DurableSession(SessionABC):
    """An SDK ``Session`` kept in the world's thread store: a conversation that survives crashes.

    Pass it as ``session=`` to ``Runner.run`` (or ``DurableRunner.run``). Its items
    live in ``world.threads`` (``threads.db`` of a local world, the ``threads``
    table of a Postgres world, sealed under the world's codec), so a conversation
    continues on another worker. Inside a run each read and write is a recorded
    call: a resumed run reads what its first execution read, and a write cut by a
    crash is written again under the same key, never twice.

    Args:
        session_id: The conversation's id (a thread of the store).
        world: Where the items live; inside a run ``None`` means the run's world.
        session_settings: The SDK's session settings (``limit`` is the default history length).

    Example:
        >>> import durable
        >>> from durable.integrations.openai_agents import DurableSession
        >>> import asyncio
        >>> session = DurableSession("chat-42", world=durable.memory_world())
        >>> asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        >>> asyncio.run(session.get_items())
        [{'role': 'user', 'content': 'hi'}]
    """

    writes_by_key = True
    """Its writes are keyed by the durable call's idempotency key: a repeated write stores nothing."""

    def __init__(self, session_id: str, *, world: Any = None, session_settings: Any = None) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise durable.ConfigurationError(
                f"DurableSession takes a non-empty session id, not {session_id!r}."
            )
        self.session_id = session_id
        self.session_settings = session_settings
        self._world = world
        recorded_session(self)  # inside a run its reads and writes are recorded, wherever called

    def _store(self) -> Any:
        world = self._world
        if world is None:
            scope = CURRENT.get()
            if scope is None:
                raise durable.ConfigurationError(
                    f"DurableSession({self.session_id!r}) has no world: pass world=... to use it "
                    "outside a durable run (inside one it uses the run's world)."
                )
            world = scope.run.world
        if not isinstance(world, WorldCore):
            raise durable.ConfigurationError(
                f"DurableSession(world=...) takes a durable world, not {world!r}."
            )
        return world.threads

    def _items(self, limit: int | None = None) -> list[Any]:
        store = self._store()
        found = store.items(NAMESPACE, self.session_id, prefix="item:", newest_first=True, limit=limit)
        return list(reversed(found))

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation's items, oldest first; the latest ``limit`` of them when given."""
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        return [json.loads(i.value) for i in self._items(limit)]

    async def add_items(self, items: list[Any]) -> None:
        """Add items at the end of the conversation (a write repeated under the same key adds nothing)."""
        key = _call_key() or uuid.uuid4().hex
        rows = [(f"item:{key}:{i:06d}", json.dumps(item).encode()) for i, item in enumerate(items)]
        self._store().write(NAMESPACE, self.session_id, rows)

    async def pop_item(self) -> Any:
        """Remove and return the conversation's last item (``None`` when it is empty)."""
        store, call = self._store(), _call_key()
        marker = None if call is None else f"pop:{call}"
        done = None if marker is None else store.get(NAMESPACE, self.session_id, marker)
        if done is not None:  # this call popped before a crash cut it: what it popped then
            return json.loads(done.value)
        last = self._items(1)
        popped = json.loads(last[0].value) if last else None
        record = [] if marker is None else [(marker, json.dumps(popped).encode())]
        store.write(NAMESPACE, self.session_id, record, delete=[i.key for i in last])
        return popped

    async def clear_session(self) -> None:
        """Remove every item of the conversation."""
        store = self._store()
        everything = store.items(NAMESPACE, self.session_id)
        store.write(NAMESPACE, self.session_id, delete=[i.key for i in everything])
