"""Streamed model responses inside a run: each event reaches the runner as it arrives, and is recorded.

``Model.stream_response`` yields the Responses API's stream events; the
runner forwards each one to ``stream_events()`` at once and builds the turn's
response from the ``response.completed`` event. Inside a run the wrapper makes
the stream one streamed durable model call: an event the model yields goes to
the runner unchanged (the live object) and is recorded as JSON at the same
time; a replay yields the recorded events rebuilt as the SDK's types, without
the model; a stream cut by a crash is sent again from its start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
from agents.items import TResponseStreamEvent
from pydantic import TypeAdapter

import durable

from ...engine import carried
from .._effects import in_run, run_stream
from ._errors import ProviderError
from ._names import MODEL_STREAM
from ._state import CURRENT_RUN

_EVENT: TypeAdapter[Any] = TypeAdapter(TResponseStreamEvent)

Identity = Callable[[str, tuple[Any, ...], dict[str, Any]], dict[str, Any]]


def _dump(event: Any) -> Any:
    return event.model_dump(mode="json", exclude_unset=True) if hasattr(event, "model_dump") else event


def _completed(event: Any) -> None:
    """Note a finished response's function calls in the run (their turn and order)."""
    if getattr(event, "type", None) != "response.completed":
        return
    run = CURRENT_RUN.get()
    response = getattr(event, "response", None)
    if run is not None and response is not None:
        run.responded(getattr(response, "output", None) or ())


def streamed(
    original: Callable[..., AsyncIterator[Any]], label: str, slot: str | None, identity: Identity
) -> Callable[..., AsyncIterator[Any]]:
    """The durable twin of a model's ``stream_response``."""

    async def stream_response(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if not in_run():
            async for event in original(*args, **kwargs):
                yield event
            return
        live: dict[int, Any] = {}

        async def events() -> AsyncIterator[Any]:
            try:
                async for event in original(*args, **kwargs):
                    chunk = {"event": _dump(event)}
                    live[id(chunk)] = event
                    yield chunk
            except openai.APIError as exc:
                raise ProviderError.of(exc) from exc

        chunks = run_stream(MODEL_STREAM, events, slot=slot, request=identity(label, args, kwargs))
        ran = False
        failure: BaseException | None = None
        try:
            async for chunk in chunks:
                event = live.pop(id(chunk), None)
                if event is None:
                    event = _EVENT.validate_python(chunk["event"])
                else:
                    ran = True
                _completed(event)
                yield event
        except durable.DurableError as exc:
            raise carried(exc) from exc
        except ProviderError as kept:
            failure = kept.error()
        finally:
            await chunks.aclose()
            run = CURRENT_RUN.get()
            if ran and run is not None:
                run.live = True
        if failure is not None:
            raise failure

    return stream_response
