"""Streamed model requests that stream live inside a run: each event recorded as it arrives.

pydantic-ai's durable model (``DurableModel``) hands a streamed request to a
durable unit that drains the stream before the run sees any of it, so inside
a run ``run_stream(...).stream_text(delta=True)`` would yield one piece.
``LiveStreams`` wraps that model: its streamed requests are a streamed
``@durable.model_call`` whose chunks are the response's events, handed to the
caller (and so to every event stream handler) as the model produces them and
recorded at the same time, then the complete response. A replay yields the
recorded events without the model; a stream cut by a crash is sent again.
Requests that do not stream go to the wrapped durable model unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponseStreamEvent
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from .._effects import run_stream
from ._backend import request_identity

_EVENT: TypeAdapter[Any] = TypeAdapter(ModelResponseStreamEvent)
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)


class _StreamAsRecorded(CompletedStreamedResponse):
    """The caller's stream: events as the durable call yields them (live, or from the log)."""

    def __init__(self, chunks: AsyncIterator[Any], model_request_parameters: ModelRequestParameters) -> None:
        super().__init__(
            ModelResponse(parts=[]), model_request_parameters=model_request_parameters, replay_events=[]
        )
        self._chunks = chunks

    def __aiter__(self) -> AsyncIterator[ModelResponseStreamEvent]:
        if self._event_iterator is None:
            self._event_iterator = self._follow()
        return self._event_iterator

    async def _follow(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async for chunk in self._chunks:
            if "response" in chunk:
                self.response = _RESPONSE.validate_python(chunk["response"])
                self.state = self.response.state
                continue
            event = _EVENT.validate_python(chunk["event"])
            self._parts_manager.apply_event(event)
            yield event
        self._finished = True

    def get(self) -> ModelResponse:
        """The response so far; once the stream has ended, the one the model returned."""
        if self._finished and self.response.parts:
            return self.response
        return super().get()


class LiveStreams(WrapperModel):
    """A durable model whose streamed requests stream live and are recorded event by event."""

    def __init__(self, durable_model: Model, *, name: str, model_id: str | None) -> None:
        super().__init__(durable_model)
        self._name = name
        self._model_id = model_id

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[CompletedStreamedResponse]:
        """One streamed durable model call: events pass through as they come, and are recorded."""
        source = self.wrapped
        model = source.wrapped if isinstance(source, WrapperModel) else source  # the model itself

        async def events() -> AsyncIterator[Any]:
            async with model.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                async for event in streamed:
                    yield {"event": _EVENT.dump_python(event, mode="json")}
                yield {"response": _RESPONSE.dump_python(streamed.get(), mode="json")}

        identity = request_identity(self._model_id, messages, model_settings, model_request_parameters)
        chunks = run_stream(self._name, events, request=identity)
        try:
            yield _StreamAsRecorded(chunks, model_request_parameters)
        finally:
            await chunks.aclose()
