"""Make an ``openai`` client durable: ``client = wrap(AsyncOpenAI(...))``.

Inside a durable run, each of these requests is a ``@durable.model_call``:

- ``client.chat.completions.create(...)`` (and ``stream=True``, and the
  ``client.chat.completions.stream(...)`` helper, which calls it),
- ``client.responses.create(...)`` (and ``stream=True``, and
  ``client.responses.stream(...)``).

A replay returns the recorded response rebuilt as the SDK's own type
(``ChatCompletion``, ``Response``, ``ChatCompletionChunk``, ...), so the code
after the call does not change. The call's identity is its keyword arguments,
the model name included; ``model=`` names a slot when the run's ``models=``
maps it (``run_workflow(..., models={"ops": "gpt-5"})`` and
``create(model="ops", ...)`` sends ``gpt-5``). Outside a run the client is
untouched: the original methods are called with exactly their arguments.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter

from ._clients import is_async_client, resource, wrap_copies, wrap_method

__all__ = ["CALL_NAMES", "wrap"]

ClientT = TypeVar("ClientT")

CALL_NAMES = {
    "chat.completions.create": "openai__chat_completions_create",
    "responses.create": "openai__responses_create",
}
"""The durable call names of the wrapped methods (a streamed call adds ``_stream``); never renamed."""


def _types() -> dict[str, tuple[Any, Any]]:
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    found: dict[str, tuple[Any, Any]] = {
        "chat.completions.create": (ChatCompletion.model_validate, ChatCompletionChunk.model_validate),
    }
    try:
        from openai.types.responses import Response, ResponseStreamEvent
    except ImportError:  # an openai release without the Responses API
        return found
    events: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    found["responses.create"] = (Response.model_validate, events.validate_python)
    return found


def wrap(client: ClientT) -> ClientT:
    """Make ``client``'s request methods durable model calls inside a run; return the same client.

    Works on ``OpenAI`` and ``AsyncOpenAI`` (and their Azure variants), and on
    the copies ``client.with_options(...)`` makes. Wrapping twice changes
    nothing. Outside a durable run every method behaves exactly as before.

    Args:
        client: An ``openai`` client.

    Returns:
        The same client object.

    Example:
        >>> from openai import AsyncOpenAI
        >>> client = wrap(AsyncOpenAI(api_key="offline", base_url="http://127.0.0.1:9/v1"))
        >>> wrap(client) is client
        True
    """
    is_async = is_async_client(client)
    for method, (rebuild, chunk) in _types().items():
        path, _, attr = method.rpartition(".")
        res = resource(client, path)
        if res is not None and hasattr(res, attr):
            wrap_method(res, attr, CALL_NAMES[method], rebuild, chunk, is_async=is_async)
    wrap_copies(client, wrap)
    return client
