"""LangChain values as the log records them: messages, a model request's identity, a tool's result.

Messages are recorded as LangChain's own dicts (``message_to_dict``), which
give back an equal message (content, tool calls, usage metadata, response
metadata, ids, chunk fields). A request's identity leaves out the message
ids: ``add_messages`` gives a new input message a new random id on every
execution, and the model's reply carries the id of the callback run that
produced it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langgraph.types import Command, Send
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

import durable

MESSAGE = "message"
COMMAND = "command"
CONTENT = "content"


def _shown(value: Any) -> Any:
    """A value JSON cannot hold, as its identity shows it: a model class by its JSON schema."""
    if isinstance(value, type) and issubclass(value, BaseModel):
        return {"schema": value.model_json_schema(), "class": value.__qualname__}
    return f"<{type(value).__qualname__}>"


def jsonable(value: Any) -> Any:
    """``value`` as JSON for a call's identity (what JSON cannot hold shown by its kind)."""
    return to_jsonable_python(value, fallback=_shown)


def message_data(message: BaseMessage) -> dict[str, Any]:
    """A message as its recorded dict."""
    return message_to_dict(message)


def message_of(data: dict[str, Any]) -> BaseMessage:
    """The message a recorded dict holds."""
    return messages_from_dict([data])[0]


def request_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as a request's identity holds them: their dicts without the message ids."""
    out = []
    for m in messages:
        data = message_to_dict(m)
        out.append({"type": data["type"], "data": {k: v for k, v in data["data"].items() if k != "id"}})
    return out


class Live:
    """What a recorded call hands back: the value itself when it ran here, rebuilt when it replayed.

    The body of the call passes its value through ``ran`` (which returns what
    the log records of it); ``of(payload)`` is that value, or, when the call
    replayed and the body never ran, ``rebuild(payload)``.
    """

    __slots__ = ("_rebuild", "_record", "_values")

    def __init__(self, record: Callable[[Any], Any], rebuild: Callable[[Any], Any]) -> None:
        self._record = record
        self._rebuild = rebuild
        self._values: list[Any] = []

    def ran(self, value: Any) -> Any:
        """Keep ``value`` for the caller; what the log records of it."""
        self._values.append(value)
        return self._record(value)

    def of(self, payload: Any) -> Any:
        """The value the caller gets."""
        return self._values[-1] if self._values else self._rebuild(payload)


# -- a tool's result: a ToolMessage, a LangGraph Command, or plain content --------------------


def _value(value: Any, what: str) -> Any:
    if isinstance(value, BaseMessage):
        return {"__message__": message_data(value)}
    if isinstance(value, list | tuple) and value and all(isinstance(v, BaseMessage) for v in value):
        return {"__messages__": [message_data(v) for v in value]}
    if isinstance(value, Send):
        return {"__send__": value.node, "arg": _value(value.arg, what)}
    try:
        data = to_jsonable_python(value)
    except Exception as exc:  # pydantic's own error types differ between releases
        raise durable.SerializationError(
            f"{what} returned {type(value).__qualname__}, which durable cannot record: {exc}. "
            "Return JSON data, messages, or a Command whose update holds them."
        ) from exc
    if data != value and not isinstance(value, tuple):
        raise durable.SerializationError(
            f"{what} returned a {type(value).__qualname__} that does not come back from JSON as "
            "itself; return JSON data, messages, or a Command whose update holds them."
        )
    return data


def _rebuilt(data: Any) -> Any:
    if isinstance(data, dict):
        if "__message__" in data:
            return message_of(data["__message__"])
        if "__messages__" in data:
            return [message_of(d) for d in data["__messages__"]]
        if "__send__" in data:
            return Send(data["__send__"], _rebuilt(data["arg"]))
    return data


def tool_result(value: Any, what: str) -> dict[str, Any]:
    """What a tool call returned, as its recorded JSON."""
    if isinstance(value, BaseMessage):
        return {MESSAGE: message_data(value)}
    if isinstance(value, Command):
        update = value.update
        if isinstance(update, dict):
            update = {str(k): _value(v, what) for k, v in update.items()}
        elif isinstance(update, list | tuple):
            update = [[str(k), _value(v, what)] for k, v in update]
        elif update is not None:
            update = _value(update, what)
        goto = value.goto
        goto_data = [_value(g, what) for g in goto] if isinstance(goto, list | tuple) else _value(goto, what)
        return {
            COMMAND: {
                "graph": value.graph,
                "update": update,
                "resume": _value(value.resume, what),
                "goto": goto_data,
                "goto_list": isinstance(goto, list | tuple),
                "update_pairs": isinstance(value.update, list | tuple),
            }
        }
    return {CONTENT: _value(value, what)}


def rebuilt_tool_result(data: dict[str, Any]) -> Any:
    """The tool result a recorded JSON holds, as the tool returned it."""
    if MESSAGE in data:
        return message_of(data[MESSAGE])
    if COMMAND in data:
        c = data[COMMAND]
        update = c["update"]
        if isinstance(update, dict):
            update = {k: _rebuilt(v) for k, v in update.items()}
        elif c.get("update_pairs"):
            update = [(k, _rebuilt(v)) for k, v in update]
        else:
            update = _rebuilt(update)
        goto = [_rebuilt(g) for g in c["goto"]] if c.get("goto_list") else _rebuilt(c["goto"])
        return Command(graph=c["graph"], update=update, resume=_rebuilt(c["resume"]), goto=goto)
    return _rebuilt(data.get(CONTENT))
