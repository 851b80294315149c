"""Talking to runs from inside: ``recv``, ``set_event``, ``write_stream``, ``close_stream``, and sends.

Each is a durable call like ``sleep`` or ``now``: it claims its position in
the scope, builds its key (``recv#n``, ``set_event#n``…), asks the recorded
index (``Recorded.talk``) and replays what it finds, or acts and records.

- ``recv`` consumes a message and records ``message.received`` in one
  transaction of the world's message store (``durable.store.MessageStore``),
  so a message is handled once across kills. With a timeout, the wait's end
  is recorded first (``message.waiting``): a resume waits only the rest.
- ``set_event``, ``write_stream`` and ``close_stream`` are events of the
  run's own log; readers in any process tail the log (``durable.runtime``).
- A send from inside a run (``record_send``) stores the message under the
  call's idempotency key before recording ``message.sent``: a sender killed
  in between sends again under the same id, which the store ignores.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from .._clock import due_at
from ..errors import ConfigurationError
from ..events import EVENT_SET, MESSAGE_RECEIVED, MESSAGE_SENT, MESSAGE_WAITING, STREAM_CLOSED, STREAM_WRITE
from ..store import Message
from . import _event_writer as ev
from ._claim import Claim
from ._context import RunContext, Scope, current_scope
from ._decide import Call, mismatch
from ._keys import message_id, value_key
from ._values import ANY, to_json

POLL_MIN = 0.0005
"""Seconds between the first checks for a message while ``recv`` waits."""

POLL_MAX = 0.002
"""The longest pause between two checks (the added latency of a message, at worst)."""

Json = dict[str, Any]


def check_topic(topic: Any, what: str) -> str | None:
    """``topic`` when it is ``None`` or a non-empty string; otherwise a ``ConfigurationError``."""
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise ConfigurationError(f"{what} takes topic=None or a non-empty string, not {topic!r}.")
    return topic


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{what} takes a non-empty string key, not {name!r}.")
    return name


def _same(claim: Claim, got: Json, field: str, attempted: Any, kind: str, key: str) -> None:
    """Raise ``NondeterminismError`` when a replayed call names another topic, stream or target."""
    if got.get(field) != attempted:
        run_id = claim.run.run_id
        raise mismatch(
            run_id,
            f"{kind} {key!r}",
            Call(kind, f"{kind}({got.get(field)!r})", "", key),
            Call(kind, f"{kind}({attempted!r})", "", key),
        )


def _first_time(claim: Claim, kind: str, field: str, attempted: Any) -> str | None:
    """The call's key, or ``None`` when the log holds the call already (naming the same ``field``)."""
    key = value_key(claim.scope.prefix, kind, claim.n)
    got = claim.recorded(claim.run.recorded.talk, Call(kind, kind, "", key))
    if got is None:
        return key
    _same(claim, got, field, attempted, kind, key)
    return None


async def recv(topic: str | None = None, *, timeout: float | None = None) -> Any:
    """Wait for the oldest message of ``topic`` not yet consumed by this run, and return it.

    Consuming the message and recording it in the run's log are one
    transaction: across kills, a message is never lost and never handled
    twice, and a resume returns the recorded message without waiting.

    Args:
        topic: The topic (``None``: the default topic only).
        timeout: Seconds to wait at most (``None``: as long as it takes). The
            wait's end is recorded, so a resume waits only what is left.

    Returns:
        The message's value as JSON data, or ``None`` when the timeout passed
        (``send`` refuses ``None``, so ``None`` always means the timeout).

    Raises:
        ConfigurationError: Outside a run, or a bad topic or timeout.
    """
    scope: Scope = current_scope("durable.recv()")
    check_topic(topic, "durable.recv()")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise ConfigurationError(f"durable.recv() takes timeout=None or seconds >= 0, not {timeout!r}.")
    run = scope.run
    with Claim(scope, "durable.recv()") as claim:
        key = value_key(scope.prefix, "recv", claim.n)
        got = claim.recorded(run.recorded.talk, Call("recv", "recv", "", key))
        wake: float | None = None
        if got is not None:
            _same(claim, got, "topic", topic, "recv", key)
            if got.get("done"):
                return None if got.get("timed_out") else got.get("value")
            wake = got.get("wake_at")
        if timeout is not None and wake is None:
            wake = run.clock() + float(timeout)
            run.emit(MESSAGE_WAITING, ev.message_waiting(key, topic, wake, claim.n))
            await run.flush_async()
        store = run.world.open_messages()
        due = None if wake is None else due_at(wake)  # in virtual time, the clock stops at the timeout
        try:
            return await _wait_message(run, store, key, topic, claim.n, wake)
        finally:
            if due is not None:
                due.cancel()


async def _wait_message(
    run: RunContext, store: Any, key: str, topic: str | None, pos: int, wake: float | None
) -> Any:
    """Poll the mailbox until a message comes (its value) or ``wake`` passes (``None``, recorded)."""
    delay = POLL_MIN
    while True:
        if store.waiting(run.run_id, topic):
            msg = _consume(run, store, key, topic, pos)
            if msg is not None:
                return json.loads(msg.data)
        if wake is not None:
            remaining = wake - run.clock()
            if remaining <= 0:
                run.emit(MESSAGE_RECEIVED, ev.message_received(key, topic, None, None, True, pos))
                await run.flush_async()
                return None
            await run.pause(min(delay, remaining), poll=True)
        else:
            await run.pause(delay, poll=True)
        delay = min(delay * 2, POLL_MAX)


def _consume(run: RunContext, store: Any, key: str, topic: str | None, pos: int) -> Message | None:
    """Consume one message and append its ``message.received`` in one transaction of the store."""
    run.flush()  # the events buffered before this call come first in the log
    seq = run.seq + 1

    def build(msg: Message) -> tuple[int, str, str]:
        data = ev.message_received(key, topic, msg.message_id, json.loads(msg.data), False, pos)
        return (seq, MESSAGE_RECEIVED, ev.encode(data))

    try:
        msg: Message | None = store.consume(run.run_id, topic, run.token, build)
    except BaseException as exc:
        run.broken = exc  # as a failed flush: this driver stops, a resume reads the log
        raise
    if msg is not None:
        run.seq = seq
    return msg


def set_event(key: str, value: Any) -> None:
    """Set the run's event ``key`` to ``value``; readers see the last value set.

    Recorded in the run's log (a replay does not set it again) and visible to
    ``handle.get_event(key)`` in any process once it is durable, at the next
    turn of the event loop at the latest.

    Args:
        key: The event's name.
        value: Its value (JSON through pydantic, like every recorded value).

    Raises:
        ConfigurationError: Outside a run, or a bad key.
    """
    scope: Scope = current_scope("durable.set_event()")
    _check_name(key, "durable.set_event()")
    run = scope.run
    with Claim(scope, "durable.set_event()") as claim:
        k = _first_time(claim, "set_event", "name", key)
        if k is None:
            return
        data = to_json(ANY, value, what="the event value", run_id=run.run_id, path=k)
        run.emit(EVENT_SET, ev.event_set(k, key, data, claim.n))
        run.flush_soon()


async def write_stream(key: str, value: Any) -> None:
    """Append ``value`` to the run's stream ``key``; it is durable when this returns.

    Readers (``handle.read_stream(key)``, any process) get every value in
    order as it is written. A replay does not write it again.

    Args:
        key: The stream's name.
        value: The value (JSON through pydantic).

    Raises:
        ConfigurationError: Outside a run, or a bad key.
    """
    scope: Scope = current_scope("durable.write_stream()")
    _check_name(key, "durable.write_stream()")
    run = scope.run
    with Claim(scope, "durable.write_stream()") as claim:
        k = _first_time(claim, "write_stream", "stream", key)
        if k is None:
            return
        data = to_json(ANY, value, what="the stream value", run_id=run.run_id, path=k)
        run.emit(STREAM_WRITE, ev.stream_write(k, key, data, claim.n))
        await run.flush_async()


def close_stream(key: str) -> None:
    """Close the run's stream ``key``: its readers end after its last value.

    Args:
        key: The stream's name.

    Raises:
        ConfigurationError: Outside a run, or a bad key.
    """
    scope: Scope = current_scope("durable.close_stream()")
    _check_name(key, "durable.close_stream()")
    run = scope.run
    with Claim(scope, "durable.close_stream()") as claim:
        k = _first_time(claim, "close_stream", "stream", key)
        if k is None:
            return
        run.emit(STREAM_CLOSED, ev.stream_closed(k, key, claim.n))
        run.flush_soon()


async def record_send(
    scope: Scope, target: str, topic: str | None, deliver: Callable[[str], Awaitable[None]]
) -> None:
    """A send from inside a run: deliver under the call's message id, then record ``message.sent``.

    ``deliver(message_id)`` must store the message unless its id is stored
    already, so a sender killed after delivering and resumed sends nothing new.
    """
    run = scope.run
    with Claim(scope, "durable.send()") as claim:
        k = _first_time(claim, "send", "target", target)
        if k is None:
            return
        mid = message_id(run.run_id, k)
        await deliver(mid)
        run.emit(MESSAGE_SENT, ev.message_sent(k, target, topic, mid, claim.n))
        await run.flush_async()
