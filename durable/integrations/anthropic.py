"""Make an ``anthropic`` client durable: ``client = wrap(AsyncAnthropic(...))``.

Inside a durable run ``client.messages.create(...)`` (with or without
``stream=True``) and the ``client.messages.stream(...)`` helper are
``@durable.model_call`` calls. A replay returns the recorded ``Message`` (or the
recorded stream events, which the helper accumulates as it does live) rebuilt
as the SDK's own types. The call's identity is its keyword arguments, the
model name included; ``model=`` names a slot when the run's ``models=`` maps
it. Outside a run the client is untouched.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter

import durable

from ._clients import given, is_async_client, wrap_copies, wrap_method
from ._effects import in_run

__all__ = ["CALL_NAMES", "wrap"]

ClientT = TypeVar("ClientT")

CALL_NAMES = {"messages.create": "anthropic__messages_create"}
"""The durable call names of the wrapped methods (a streamed call adds ``_stream``); never renamed."""


def _stream_helper(messages: Any, is_async: bool) -> None:
    """Make ``messages.stream(...)`` use the wrapped ``create(stream=True)`` inside a run."""
    from anthropic import NOT_GIVEN
    from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager

    original = messages.stream

    def stream(*args: Any, **kwargs: Any) -> Any:
        if args or not in_run():
            return original(*args, **kwargs)
        fmt: Any = kwargs.pop("output_format", NOT_GIVEN)
        if given({"output_format": fmt}) and fmt is not None:
            raise durable.ConfigurationError(
                "messages.stream(output_format=...) is not recorded inside a durable run; pass the schema "
                "as output_config={'format': ...} or use messages.parse(...)."
            )
        fmt = NOT_GIVEN
        if is_async:
            return AsyncMessageStreamManager(messages.create(stream=True, **kwargs), output_format=fmt)
        return MessageStreamManager(lambda: messages.create(stream=True, **kwargs), output_format=fmt)

    stream.__doc__ = original.__doc__
    setattr(stream, "__durable_wrapped__", True)  # noqa: B010 - a marker on a function object
    messages.stream = stream


def wrap(client: ClientT) -> ClientT:
    """Make ``client.messages`` durable model calls inside a run; return the same client.

    Works on ``Anthropic`` and ``AsyncAnthropic``, and on the copies
    ``client.with_options(...)`` makes. Wrapping twice changes nothing.
    Outside a durable run every method behaves exactly as before.

    Args:
        client: An ``anthropic`` client.

    Returns:
        The same client object.

    Example:
        >>> from anthropic import AsyncAnthropic
        >>> client = wrap(AsyncAnthropic(api_key="offline", base_url="http://127.0.0.1:9"))
        >>> wrap(client) is client
        True
    """
    from anthropic.types import Message, RawMessageStreamEvent

    is_async = is_async_client(client)
    messages: Any = getattr(client, "messages")  # noqa: B009 - ClientT is any client type
    events: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    if getattr(messages.create, "__durable_wrapped__", False):
        return client
    wrap_method(
        messages,
        "create",
        CALL_NAMES["messages.create"],
        Message.model_validate,
        events.validate_python,
        is_async=is_async,
    )
    if hasattr(messages, "stream"):
        _stream_helper(messages, is_async)
    wrap_copies(client, wrap)
    return client
