"""Every model response a durable model call: ``Model`` instances wrapped in place, providers wrapped.

``wrap_model(model)`` replaces ``get_response`` and ``stream_response`` on the
instance itself (its class, ``isinstance`` checks and every other attribute
stay the SDK's), idempotently; outside a run the wrappers call the originals
with exactly the arguments they got. ``DurableProvider`` wraps the run's
``ModelProvider``, so a model named by a string keeps going through it (the
SDK picks default settings by whether ``agent.model`` is a string) and the
instance it returns is wrapped before the runner uses it; a name that is a
slot of the run's ``models=`` is sent as the model it maps to.

A response is recorded as JSON (only the fields the model set, so the items
the runner builds from a rebuilt response equal those of the live one) with
its usage and model beside it for budgets; a call that ran hands the runner
its live response. A streamed response is recorded event by event as the
events arrive (``_stream``). An ``openai`` error is recorded with what the
SDK's retry decision reads and raised again as its own type (``_errors``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import openai
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

import durable

from ...engine import carried
from .._effects import in_run, run_effect
from ._errors import ProviderError
from ._names import MODEL
from ._state import CURRENT_RUN
from ._stream import streamed

WRAPPED = "__durable_wrapped__"
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_SIGNATURE = inspect.signature(Model.get_response)
_UNMAPPED = "\0unmapped"

VOLATILE_SETTINGS = frozenset({"prompt_cache_key"})
"""``ModelSettings.extra_args`` keys left out of a request's identity: the SDK makes a new one per run."""

NOT_IN_IDENTITY = frozenset({"extra_headers", "timeout"})
"""Model settings left out of a request's identity: they do not change what the model answers."""


def jsonable(value: Any) -> Any:
    """``value`` as JSON data; what JSON cannot hold is named by its type."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__qualname__}>")


def _tool(tool: Any) -> Any:
    name = getattr(tool, "name", None)
    schema = getattr(tool, "params_json_schema", None)
    if schema is not None:  # a function tool
        return {
            "name": name,
            "description": getattr(tool, "description", None),
            "parameters": schema,
            "strict": getattr(tool, "strict_json_schema", None),
        }
    return {"type": type(tool).__name__, "name": name, "config": jsonable(getattr(tool, "tool_config", None))}


def _settings(settings: Any) -> Any:
    data = settings.to_json_dict() if hasattr(settings, "to_json_dict") else jsonable(settings)
    data = {k: v for k, v in data.items() if k not in NOT_IN_IDENTITY}
    extra = data.get("extra_args")
    if isinstance(extra, dict):
        data["extra_args"] = {k: v for k, v in extra.items() if k not in VOLATILE_SETTINGS} or None
    return data


def _output_schema(schema: Any) -> Any:
    if schema is None:
        return None
    if schema.is_plain_text():
        return {"name": schema.name(), "plain_text": True}
    return {"name": schema.name(), "schema": schema.json_schema(), "strict": schema.is_strict_json_schema()}


def _handoff(h: Any) -> Any:
    return {
        "tool_name": h.tool_name,
        "description": h.tool_description,
        "input_json_schema": h.input_json_schema,
        "agent_name": h.agent_name,
    }


def request_identity(model: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A model request's identity: the model, the agent, the request without what changes every run."""
    try:
        bound = _SIGNATURE.bind(None, *args, **kwargs).arguments
    except TypeError:  # a signature of a later release: its arguments as given
        bound = {"args": args, **kwargs}
    run = CURRENT_RUN.get()
    identity: dict[str, Any] = {"model": model, "agent": None if run is None else run.agent}
    for key, value in bound.items():
        if key in ("self", "tracing"):
            continue
        if key == "tools":
            identity[key] = [_tool(t) for t in value or ()]
        elif key == "model_settings":
            identity[key] = _settings(value)
        elif key == "output_schema":
            identity[key] = _output_schema(value)
        elif key == "handoffs":
            identity[key] = [_handoff(h) for h in value or ()]
        else:
            identity[key] = jsonable(value)
    return identity


def encode(response: ModelResponse, model: str) -> dict[str, Any]:
    """A response as its recorded JSON, with its usage and model where budgets read them."""
    usage = response.usage
    return {
        "response": _RESPONSE.dump_python(response, mode="json", exclude_unset=True),
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        "model": model,
    }


def decode(payload: dict[str, Any]) -> ModelResponse:
    """A recorded response rebuilt as the SDK's ``ModelResponse``."""
    return _RESPONSE.validate_python(payload["response"])


def model_label(model: Any) -> str:
    """What names a model in a request's identity: its name, else its class."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else f"{type(model).__module__}.{type(model).__qualname__}"


def _noted(response: ModelResponse) -> ModelResponse:
    run = CURRENT_RUN.get()
    if run is not None:
        run.responded(response.output)
    return response


def wrap_model(model: Model, *, name: str | None = None, slot: str | None = None) -> Model:
    """Make ``model``'s responses durable model calls inside a run (in place, once); return it."""
    original = model.get_response
    if getattr(original, WRAPPED, False):
        return model
    label = name or model_label(model)

    async def get_response(*args: Any, **kwargs: Any) -> ModelResponse:
        if not in_run():
            return await original(*args, **kwargs)
        live: list[ModelResponse] = []

        async def body() -> Any:
            try:
                response = await original(*args, **kwargs)
            except openai.APIError as exc:
                raise ProviderError.of(exc) from exc
            live.append(response)
            return encode(response, label)

        failure: BaseException | None = None
        try:
            payload = await run_effect(
                "model", MODEL, body, slot=slot, request=request_identity(label, args, kwargs)
            )
        except durable.DurableError as exc:
            raise carried(exc) from exc
        except ProviderError as kept:
            failure = kept.error()
        if failure is not None:
            raise failure  # outside the handler: the SDK reads the error's own chain
        if live:
            run = CURRENT_RUN.get()
            if run is not None:
                run.live = True
            return _noted(live[-1])
        return _noted(decode(payload))

    stream = streamed(model.stream_response, label, slot, request_identity)
    for fn, orig in ((get_response, original), (stream, model.stream_response)):
        functools.update_wrapper(fn, orig)
        setattr(fn, WRAPPED, True)
    model.get_response = get_response  # type: ignore[method-assign]
    model.stream_response = stream  # type: ignore[method-assign]
    return model


class DurableProvider(ModelProvider):
    """The run's ``ModelProvider``, whose models are durable inside the run.

    A model name that is a slot of ``run_workflow(models=...)`` is asked of the
    provider as the model it maps to, and its calls count under that slot.
    """

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        """The provider's model for ``model_name``, wrapped in place."""
        slot = None
        if isinstance(model_name, str) and in_run():
            mapped = durable.model_for(model_name, default=_UNMAPPED)
            if mapped != _UNMAPPED:
                slot, model_name = model_name, mapped
        model = self.inner.get_model(model_name)
        return wrap_model(model, name=model_name, slot=slot)

    async def aclose(self) -> None:
        """Close the inner provider."""
        await self.inner.aclose()


def durable_provider(provider: ModelProvider) -> ModelProvider:
    """``provider`` wrapped once: a ``DurableProvider`` is returned as it is."""
    return provider if isinstance(provider, DurableProvider) else DurableProvider(provider)
