"""Shared by ``openai.wrap`` and ``anthropic.wrap``: one request method made a durable model call.

Both SDKs are generated from the same template: resources with keyword-only
request methods that return pydantic models (or a stream of them with
``stream=True``). ``wrap_method`` replaces one such method on one resource
instance with a function that, outside a durable run, calls the original with
exactly the arguments it was given, and inside a run makes the request a
``@durable.model_call``: the identity is the request's keyword arguments (the
model name included, after routing it through the run's ``models=`` mapping),
the recorded value is the response as JSON, and the caller always gets the
SDK's own type rebuilt from it (``model_validate``), on the first run and on a
replay alike. A stream records its chunks as they arrive.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any

from pydantic_core import to_jsonable_python

import durable

from ._effects import in_run, run_effect, run_effect_sync, run_stream

NOT_IN_IDENTITY = frozenset({"extra_headers", "timeout"})
"""Request arguments left out of a call's identity: they do not change what the model answers."""

_UNMAPPED = "\0unmapped"
WRAPPED = "__durable_wrapped__"

Rebuild = Callable[[Any], Any]


def given(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments actually given: the SDKs' ``omit`` / ``NOT_GIVEN`` markers left out."""
    return {k: v for k, v in kwargs.items() if type(v).__name__ not in ("Omit", "NotGiven")}


def route_model(kwargs: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Map ``model=`` through the run's ``models=`` when it names a slot; the slot, or ``None``.

    ``create(model="ops", ...)`` in a run started with ``models={"ops": "gpt-5"}``
    sends ``gpt-5``; a model name that is no slot is sent as written.
    """
    model = kwargs.get("model")
    if not isinstance(model, str):
        return kwargs, None
    mapped = durable.model_for(model, default=_UNMAPPED)
    if mapped == _UNMAPPED:
        return kwargs, None
    return {**kwargs, "model": mapped}, model


def identity(kwargs: dict[str, Any]) -> Any:
    """A request's identity: its given arguments as JSON, without ``NOT_IN_IDENTITY``."""
    return to_jsonable_python(
        {k: v for k, v in given(kwargs).items() if k not in NOT_IN_IDENTITY},
        fallback=lambda v: f"<{type(v).__qualname__}>",
    )


def dump(value: Any) -> Any:
    """A response or chunk as JSON: the fields the server sent (pydantic models by alias)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return to_jsonable_python(value)


class _NoResponse:
    """Stands for the HTTP response of a stream whose chunks come from the log."""

    headers: dict[str, str] = {}  # noqa: RUF012 - read-only, as the SDK reads it
    status_code = 200

    def close(self) -> None:
        """Nothing to release."""

    async def aclose(self) -> None:
        """Nothing to release."""


class AsyncRecordedStream:
    """What ``create(stream=True)`` returns in a run: the SDK's chunks, recorded as they arrive.

    It stands in for the SDK's ``AsyncStream`` (iteration, ``close``, ``async
    with``, ``response``), so the SDK's ``stream()`` helpers accept it too.
    """

    def __init__(self, chunks: AsyncIterator[Any], rebuild: Rebuild) -> None:
        self.response = _NoResponse()
        self._chunks = chunks
        self._rebuild = rebuild

    def __aiter__(self) -> AsyncRecordedStream:
        return self

    async def __anext__(self) -> Any:
        return self._rebuild(await self._chunks.__anext__())

    async def close(self) -> None:
        """Stop reading; the chunks read so far are the recorded outcome."""
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncRecordedStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class RecordedStream:
    """The sync client's ``create(stream=True)`` in a run: the recorded chunks, rebuilt."""

    def __init__(self, chunks: list[Any], rebuild: Rebuild) -> None:
        self.response = _NoResponse()
        self._chunks: Iterator[Any] = iter(chunks)
        self._rebuild = rebuild

    def __iter__(self) -> RecordedStream:
        return self

    def __next__(self) -> Any:
        return self._rebuild(next(self._chunks))

    def close(self) -> None:
        """Nothing to release: the whole stream was read when it was recorded."""

    def __enter__(self) -> RecordedStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def is_async_client(client: Any) -> bool:
    """Whether ``client`` is one of the SDK's async clients (``AsyncOpenAI``, ``AsyncAnthropic``, ...)."""
    return any(c.__name__.startswith("Async") for c in type(client).__mro__)


def _recorded_async(original: Callable[..., Any], name: str, rebuild: Rebuild, chunk: Rebuild) -> Any:
    async def request(*args: Any, **kwargs: Any) -> Any:
        if args or not in_run():
            return await original(*args, **kwargs)
        send, slot = route_model(kwargs)
        if kwargs.get("stream") is True:

            async def chunks() -> AsyncIterator[Any]:
                stream = await original(**send)
                try:
                    async for c in stream:
                        yield dump(c)
                finally:
                    await stream.close()

            return AsyncRecordedStream(
                run_stream(f"{name}_stream", chunks, slot=slot, request=identity(send)), chunk
            )

        async def body() -> Any:
            return dump(await original(**send))

        return rebuild(await run_effect("model", name, body, slot=slot, request=identity(send)))

    return request


def _recorded_sync(original: Callable[..., Any], name: str, rebuild: Rebuild, chunk: Rebuild) -> Any:
    def request(*args: Any, **kwargs: Any) -> Any:
        if args or not in_run():
            return original(*args, **kwargs)
        send, slot = route_model(kwargs)
        if kwargs.get("stream") is True:

            def whole() -> list[Any]:
                with original(**send) as stream:
                    return [dump(c) for c in stream]

            return RecordedStream(
                run_effect_sync(f"{name}_stream", whole, slot=slot, request=identity(send)), chunk
            )
        return rebuild(
            run_effect_sync(name, lambda: dump(original(**send)), slot=slot, request=identity(send))
        )

    return request


def wrap_method(
    resource: Any, attr: str, name: str, rebuild: Rebuild, chunk: Rebuild, *, is_async: bool
) -> None:
    """Make ``resource.<attr>`` a durable model call named ``name`` inside a run (once).

    Args:
        resource: The SDK resource instance, e.g. ``client.chat.completions``.
        attr: The request method, e.g. ``"create"``.
        name: The durable call's name, e.g. ``"openai__chat_completions_create"``.
        rebuild: Rebuilds the SDK's response type from its JSON.
        chunk: Rebuilds one stream chunk (event) from its JSON.
        is_async: Whether the client is async.
    """
    original = getattr(resource, attr)
    if getattr(original, WRAPPED, False):
        return
    make = _recorded_async if is_async else _recorded_sync
    request = make(original, name, rebuild, chunk)
    functools.update_wrapper(request, original)
    setattr(request, WRAPPED, True)
    setattr(resource, attr, request)


def resource(client: Any, path: str) -> Any | None:
    """``client.<path>`` (dotted), or ``None`` when this SDK version has no such resource."""
    obj = client
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def wrap_copies(client: Any, wrap: Callable[[Any], Any]) -> None:
    """Make ``client.copy(...)`` / ``client.with_options(...)`` return wrapped copies too."""
    copy = getattr(client, "copy", None)
    if copy is None or getattr(copy, WRAPPED, False):
        return

    def wrapped_copy(*args: Any, **kwargs: Any) -> Any:
        return wrap(copy(*args, **kwargs))

    functools.update_wrapper(wrapped_copy, copy)
    setattr(wrapped_copy, WRAPPED, True)
    client.copy = wrapped_copy
    client.with_options = wrapped_copy
