"""The events of talking to a run: messages, events set, streams written and read."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._base import EventBase


class StreamCursor(EventBase):
    """Chunks of a streamed model call consumed so far; ``terminal`` when it ended."""

    type: Literal["stream.cursor"] = "stream.cursor"
    key: str
    chunks: int
    terminal: bool
    data: list[Any] = Field(default_factory=list)


class MessageWaiting(EventBase):
    """A ``recv`` with a timeout began waiting: the time its wait ends (a resume waits only the rest)."""

    type: Literal["message.waiting"] = "message.waiting"
    key: str
    topic: str | None = None
    wake_at: float
    pos: int = 0


class MessageReceived(EventBase):
    """A ``recv`` returned: the message it consumed, or ``timed_out`` with no message.

    On a world whose messages live beside the log, this event and the
    message's consumption commit in one transaction.
    """

    type: Literal["message.received"] = "message.received"
    key: str
    topic: str | None = None
    message_id: str | None = None
    value: Any = None
    timed_out: bool = False
    pos: int = 0


class MessageSent(EventBase):
    """A ``send`` made inside the run: the message is stored under ``message_id`` (sent once)."""

    type: Literal["message.sent"] = "message.sent"
    key: str
    target: str
    topic: str | None = None
    message_id: str
    pos: int = 0


class EventSet(EventBase):
    """``durable.set_event(name, value)``: readers see the last value of ``name``."""

    type: Literal["event.set"] = "event.set"
    key: str
    name: str
    value: Any = None
    pos: int = 0


class StreamWrite(EventBase):
    """One value written to the stream ``stream`` (``write_stream``, or a mirrored model chunk).

    A mirrored chunk has no position of its own (``pos`` is ``None``): its key
    names the model call and the chunk's index.
    """

    type: Literal["stream.write"] = "stream.write"
    key: str
    stream: str
    value: Any = None
    pos: int | None = 0


class StreamClosed(EventBase):
    """``durable.close_stream(stream)``: readers of the stream end after its last value."""

    type: Literal["stream.closed"] = "stream.closed"
    key: str
    stream: str
    pos: int = 0
