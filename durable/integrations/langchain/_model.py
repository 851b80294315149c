"""``wrap(model)``: a LangChain chat model whose calls are recorded model calls inside a run.

The model object keeps its class and fields; its class is swapped for a
subclass made once per class (``Durable<Class>``) that overrides the public
Runnable methods: ``invoke``, ``ainvoke``, ``stream``, ``astream``,
``batch`` and ``abatch``. Everything a caller or LangGraph uses goes through
them: ``bind_tools(...)`` and ``bind(...)`` return bindings that call them
with the bound arguments, and ``with_structured_output(...)`` a sequence of
such a binding and a parser, so a structured output replays as its type (the
parser runs on the replayed message). The overrides sit above LangChain's
cache and callbacks: a call that runs goes through them as before (a graph's
``"messages"`` stream mode sees its tokens live), a replayed one returns the
recorded message without calling anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableBinding, RunnableConfig
from langchain_core.runnables.config import get_config_list

import durable

from ...engine import keyed
from .._effects import in_run, run_stream
from .._graph_tasks import graph_call, graph_call_sync, passing_controls, task_scope
from .._manifest import name_part
from ._messages import Live, jsonable, message_data, message_of, request_messages

M = TypeVar("M")
Stop = list[str] | None

_CLASSES: dict[type, type] = {}


def _usage(message: BaseMessage) -> dict[str, Any] | None:
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return None
    return {"input_tokens": usage.get("input_tokens", 0), "output_tokens": usage.get("output_tokens", 0)}


def _recorded(message: BaseMessage) -> dict[str, Any]:
    """A reply as the log records it: the message, and its usage where budgets read it."""
    data: dict[str, Any] = {"message": message_data(message)}
    usage = _usage(message)
    if usage is not None:
        data["usage"] = usage
    model = (getattr(message, "response_metadata", None) or {}).get("model_name")
    if isinstance(model, str):
        data["model"] = model
    return data


def _message(payload: dict[str, Any]) -> BaseMessage:
    """The reply a recorded payload holds."""
    return message_of(payload["message"])


def _chunk(chunk: BaseMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"chunk": message_data(chunk)}
    usage = _usage(chunk)
    if usage is not None:
        data["usage"] = usage
    return data


class DurableChatModel:
    """The overrides a wrapped chat model's class gets (see ``wrap``)."""

    def _durable_name(self) -> str:
        base = type(self).__mro__[2]  # Durable<Class>, this class, <Class>
        return f"langchain__{name_part(base.__name__)}"

    def _durable_identity(self, input: Any, stop: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        model = cast(BaseChatModel, self)
        messages = model._convert_input(input).to_messages()
        return {
            "model": {"class": self._durable_name(), "params": jsonable(model._identifying_params)},
            "messages": request_messages(messages),
            "stop": stop,
            "kwargs": jsonable(kwargs),
        }

    def invoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """``BaseChatModel.invoke``, a recorded model call inside a run."""
        parent: Any = super()
        if not in_run():
            return parent.invoke(input, config, stop=stop, **kwargs)  # type: ignore[no-any-return]
        reply = Live(_recorded, _message)
        identity = self._durable_identity(input, stop, kwargs)
        with passing_controls():
            payload = graph_call_sync(
                "model",
                self._durable_name(),
                lambda: reply.ran(parent.invoke(input, config, stop=stop, **kwargs)),
                request=identity,
            )
        return cast(AIMessage, reply.of(payload))

    async def ainvoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """``BaseChatModel.ainvoke``, a recorded model call inside a run."""
        parent: Any = super()
        if not in_run():
            return await parent.ainvoke(input, config, stop=stop, **kwargs)  # type: ignore[no-any-return]
        reply = Live(_recorded, _message)

        async def body() -> Any:
            return reply.ran(await parent.ainvoke(input, config, stop=stop, **kwargs))

        identity = self._durable_identity(input, stop, kwargs)
        with passing_controls():
            payload = await graph_call("model", self._durable_name(), body, request=identity)
        return cast(AIMessage, reply.of(payload))

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        """``BaseChatModel.stream``; inside a run the chunks are recorded as one call and then yielded."""
        parent: Any = super()
        if not in_run():
            yield from parent.stream(input, config, stop=stop, **kwargs)
            return

        def body() -> list[dict[str, Any]]:
            return [_chunk(c) for c in parent.stream(input, config, stop=stop, **kwargs)]

        identity = self._durable_identity(input, stop, kwargs)
        with passing_controls():
            chunks = graph_call_sync("model", f"{self._durable_name()}_stream", body, request=identity)
        for data in chunks:
            yield cast(AIMessageChunk, message_of(data["chunk"]))

    async def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        """``BaseChatModel.astream``; inside a run each chunk is recorded as it arrives and replayed after."""
        parent: Any = super()
        if not in_run():
            async for c in parent.astream(input, config, stop=stop, **kwargs):
                yield c
            return

        async def chunks() -> AsyncIterator[dict[str, Any]]:
            async for c in parent.astream(input, config, stop=stop, **kwargs):
                yield _chunk(c)

        identity = self._durable_identity(input, stop, kwargs)
        stream = run_stream(f"{self._durable_name()}_stream", chunks, request=identity)
        try:
            while True:
                with passing_controls(), task_scope():
                    try:
                        data = await stream.__anext__()
                    except StopAsyncIteration:
                        return
                yield cast(AIMessageChunk, message_of(data["chunk"]))
        finally:
            await stream.aclose()

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """``Runnable.batch``; inside a run the inputs are asked one after another, each a recorded call."""
        if not in_run():
            parent: Any = super()
            return parent.batch(inputs, config, return_exceptions=return_exceptions, **kwargs)  # type: ignore[no-any-return]
        configs = get_config_list(config, len(inputs))
        out: list[Any] = []
        for item, item_config in zip(inputs, configs, strict=True):
            try:
                out.append(self.invoke(item, item_config, **kwargs))
            except Exception as exc:
                if not return_exceptions:
                    raise
                out.append(exc)
        return out

    async def abatch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """``Runnable.abatch``; inside a run each input is a recorded call in ``batch[<i>]`` of its own."""
        if not in_run():
            parent: Any = super()
            return await parent.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs)  # type: ignore[no-any-return]
        configs = get_config_list(config, len(inputs))

        async def one(i: int, item: Any, item_config: RunnableConfig) -> Any:
            with task_scope(), keyed("batch", str(i)):
                try:
                    return await self.ainvoke(item, item_config, **kwargs)
                except Exception as exc:
                    if not return_exceptions:
                        raise
                    return exc

        return list(
            await asyncio.gather(
                *(one(i, x, c) for i, (x, c) in enumerate(zip(inputs, configs, strict=True)))
            )
        )


def wrap(model: M) -> M:
    """Make a LangChain chat model's calls recorded model calls inside a durable run.

    ``invoke``, ``ainvoke``, ``stream``, ``astream``, ``batch`` and ``abatch``
    (and so ``bind_tools(...)`` and ``with_structured_output(...)`` built on
    them) are each a ``@durable.model_call`` inside a run: a resume replays the
    recorded ``AIMessage`` (content, tool calls, usage metadata) or the
    recorded chunks of a stream, and sends again only a call the crash cut.
    Inside a LangGraph task the calls are keyed by the task, so the tasks of
    one step may call the model at once. Outside a run the model is untouched:
    it calls its provider with exactly its arguments.

    The object itself is made durable (its class becomes a subclass of its
    class, ``isinstance`` checks still hold) and returned; wrapping it again
    changes nothing. A binding (``model.bind_tools(...)``) is returned with its
    model wrapped.

    Args:
        model: A ``BaseChatModel``, or a ``RunnableBinding`` of one.

    Returns:
        The same object.

    Raises:
        ConfigurationError: ``model`` is no chat model.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> model = wrap(FakeListChatModel(responses=["hello"]))
        >>> model.invoke("hi").content  # outside a run: a plain call
        'hello'
    """
    if isinstance(model, RunnableBinding):
        wrap(model.bound)
        return model
    if not isinstance(model, BaseChatModel):
        raise durable.ConfigurationError(
            f"wrap() takes a LangChain chat model (a BaseChatModel such as ChatOpenAI), not "
            f"{type(model).__qualname__}; wrap tools with wrap_tool()."
        )
    if isinstance(model, DurableChatModel):
        return model
    cls = type(model)
    made = _CLASSES.get(cls)
    if made is None:
        meta: Any = type(cls)  # pydantic's metaclass makes the subclass
        made = _CLASSES[cls] = meta(
            f"Durable{cls.__name__}", (DurableChatModel, cls), {"__module__": cls.__module__}
        )
    object.__setattr__(model, "__class__", made)
    return model


def wrapped(model: Any) -> bool:
    """Whether ``model`` (or the model a binding holds) was made durable by ``wrap``."""
    while isinstance(model, RunnableBinding):
        model = model.bound
    return isinstance(model, DurableChatModel)
