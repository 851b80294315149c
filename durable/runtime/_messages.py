"""Talking to runs from outside: ``send``, and reading a run's events and streams from any process.

Events and streams are events of the run's own log (``event.set``,
``stream.write``, ``stream.closed``), so a reader needs nothing but the log:
it tails the run's rows after the last seq it saw (``EventLog.read(run_id,
after_seq)``), polling with a short pause. A compacted log is read through
its snapshot, whose state keeps every talk record in order.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from .._clock import due_at, monotonic, poll_sleep, wall
from ..engine import ANY, CURRENT, WorldCore, check_topic, decode_state, encode, record_send, to_json
from ..errors import ConfigurationError, RunFinishedError
from ..events import EVENT_SET, RUN_CANCELLED, RUN_COMPLETED, RUN_FAILED, STREAM_CLOSED, STREAM_WRITE
from ._status import run_status

POLL_MIN = 0.0005
"""Seconds between a reader's first polls of the log."""

POLL_MAX = 0.002
"""The longest pause between two polls (the added latency of a value, at worst)."""

_ENDED = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED})
_WANTED = frozenset({EVENT_SET, STREAM_WRITE, STREAM_CLOSED, "snapshot", *_ENDED})

Json = dict[str, Any]


async def send(run_id: str, value: Any, *, topic: str | None = None, world: WorldCore | None = None) -> None:
    """Send ``value`` to the run ``run_id``; its ``durable.recv(topic)`` returns it.

    From inside a run this is an idempotent durable call: the message is
    stored under the call's idempotency key before the send is recorded, so
    a sender that is killed and resumed sends it once. From outside a run
    each call sends one message.

    Args:
        run_id: The addressee: a run of ``world`` that has not finished (enqueued,
            running, interrupted, or waiting for a message).
        value: The message (JSON through pydantic); ``None`` is refused.
        topic: The topic (``None``: the default topic).
        world: The addressee's world (inside a run, the run's own by default).

    Raises:
        ConfigurationError: ``value`` is ``None``, a bad topic, or no world.
        RunNotFoundError: The world has no run ``run_id``.
        RunFinishedError: The run has finished (completed, failed or cancelled):
            nothing would read the message, so it is not stored. Inside a run
            the sender's body gets the error and nothing is recorded.
    """
    check_topic(topic, "durable.send()")
    if value is None:
        raise ConfigurationError(
            "durable.send() refuses None as a message: recv() returns None only when its "
            "timeout passes. Send a value, e.g. {} or a string."
        )
    scope = CURRENT.get()
    if world is None:
        if scope is None:
            raise ConfigurationError("durable.send() outside a run needs world=.")
        world = scope.run.world
    if not isinstance(run_id, str) or not run_id:
        raise ConfigurationError(f"durable.send() takes a run id string, not {run_id!r}.")
    data = encode(to_json(ANY, value, what="the message", run_id=run_id, path=None))
    store = world.open_messages()
    target_world = world

    async def deliver(message_id: str) -> None:
        # Checked when the message is stored, not when a recorded send replays:
        # the addressee may have finished (or gone) since.
        _check_open(target_world, run_id)
        store.send(run_id, topic, data, message_id, target_world.clock())

    if scope is None:
        await deliver(f"msg_{uuid.uuid4().hex}")
    else:
        await record_send(scope, run_id, topic, deliver)


def _check_open(world: WorldCore, run_id: str) -> None:
    """Refuse a message that nothing would ever read.

    Raises:
        RunNotFoundError: The world has no such run.
        RunFinishedError: The run has finished.
    """
    status = run_status(world, run_id).status
    if status not in ("completed", "failed", "cancelled"):
        return
    advice = (
        "start a new run to send it to"
        if status == "completed"
        else "start a new run to send it to, or let this one continue first with "
        f"`durable.resume_run({run_id!r}, world=...)` (or `little resume`) and send again"
    )
    raise RunFinishedError(
        f"run {run_id!r} has finished ({status}): it will never read a message, so none was sent; {advice}.",
        run_id=run_id,
        status=status,
    )


class LogTail:
    """A run's log read from the last seq seen on, by a reader in any process.

    Each ``poll()`` returns the new rows of interest as ``(type, data)``;
    a snapshot is turned into the talk records and terminal event it holds.
    """

    def __init__(self, world: WorldCore, run_id: str):
        self.world = world
        self.run_id = run_id
        self.after = 0

    def poll(self) -> list[tuple[str, Json]]:
        """The rows written since the last poll (events, stream values, closes, the run's end)."""
        rows = self.world.log.read(self.run_id, self.after)
        out: list[tuple[str, Json]] = []
        for seq, type_, data in rows:
            self.after = seq
            if type_ not in _WANTED:
                continue
            d = json.loads(data)
            if type_ == "snapshot":
                out.append(("snapshot", decode_state(d["state"], self.run_id)))
            else:
                out.append((type_, d))
        return out


async def _pause(delay: float) -> float:
    await poll_sleep(delay)
    return min(delay * 2, POLL_MAX)


async def get_event(world: WorldCore, run_id: str, key: str, timeout: float | None = None) -> Any:
    """The last value the run set for its event ``key``, waiting for the first one.

    Returns:
        The value, or ``None`` when ``timeout`` passes first or the run
        ended without setting it.
    """
    tail = LogTail(world, run_id)
    give_up = None if timeout is None else monotonic() + timeout
    due = None if timeout is None else due_at(wall() + timeout)  # virtual time stops there
    try:
        return await _wait_event(tail, key, give_up)
    finally:
        if due is not None:
            due.cancel()


async def _wait_event(tail: LogTail, key: str, give_up: float | None) -> Any:
    delay = POLL_MIN
    while True:
        found, value, ended = False, None, False
        for type_, d in tail.poll():
            if type_ == EVENT_SET and d["name"] == key:
                found, value = True, d.get("value")
            elif type_ == "snapshot":
                for t in (d.get("talk") or {}).values():
                    if t.get("kind") == "set_event" and t.get("name") == key:
                        found, value = True, t.get("value")
                ended = bool(d.get("terminal")) and d["terminal"][0] in _ENDED
            elif type_ in _ENDED:
                ended = True
        if found:
            return value
        if ended or (give_up is not None and monotonic() >= give_up):
            return None
        delay = await _pause(delay if give_up is None else min(delay, max(give_up - monotonic(), 0)))


async def read_stream(world: WorldCore, run_id: str, key: str, start: int = 0) -> AsyncIterator[Any]:
    """Every value of the stream ``key`` from offset ``start``, live, until it closes or the run ends."""
    tail = LogTail(world, run_id)
    seen = 0  # values of the stream met so far, including the skipped ones
    delay = POLL_MIN
    while True:
        rows = tail.poll()
        for type_, d in rows:
            if type_ == STREAM_WRITE and d["stream"] == key:
                seen += 1
                if seen > start:
                    yield d.get("value")
            elif type_ == STREAM_CLOSED and d["stream"] == key:
                return
            elif type_ == "snapshot":
                talk = [t for t in (d.get("talk") or {}).values() if t.get("stream") == key]
                values = [t.get("value") for t in talk if t.get("kind") == "write_stream"]
                for v in values[max(seen, start) :]:
                    yield v
                seen = max(seen, len(values))
                if any(t.get("kind") == "close_stream" for t in talk):
                    return
                if d.get("terminal") and d["terminal"][0] in _ENDED:
                    return
            elif type_ in _ENDED:
                return
        if rows:
            delay = POLL_MIN
        else:
            delay = await _pause(delay)
