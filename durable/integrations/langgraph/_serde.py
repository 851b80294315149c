"""The serializer of ``DurableSaver``: LangGraph's own, that never pickles and never unpickles.

LangGraph serializes channel values with ``JsonPlusSerializer`` (msgpack,
with extension types naming a module and a class). It falls back to pickle
only when asked (``pickle_fallback=True``), and unpickles any stored row
whose type says ``pickle``. ``NoPickle`` wraps a serializer and refuses both:
a value the serializer would pickle fails the write with
``SerializationError``, and a stored ``pickle`` row (written by something
else into the store) fails the read the same way, before any byte of it is
unpickled. The default serializer is strict: it rebuilds only LangGraph's
list of safe types (messages, ``Send``, ``Interrupt``, dates, ...) and the
classes added with ``saver.with_allowlist([(module, name), ...])``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import durable

KINDS = frozenset({"null", "bytes", "bytearray", "msgpack", "json"})
"""The serialization types a row may have: every type LangGraph writes except ``pickle``."""


def _kind(type_: str) -> str:
    """``msgpack`` of ``msgpack`` and of ``msgpack+aes`` (LangGraph's encrypted serializer)."""
    return type_.split("+", 1)[0]


def strict() -> JsonPlusSerializer:
    """LangGraph's serializer without pickle, rebuilding only its safe types."""
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)


class NoPickle(SerializerProtocol):
    """A serializer that refuses to pickle or unpickle (see the module's docstring).

    Args:
        inner: The serializer that does the work (``strict()`` by default).

    Raises:
        ConfigurationError: ``inner`` is a ``JsonPlusSerializer`` told to fall back to pickle.
    """

    def __init__(self, inner: SerializerProtocol | None = None) -> None:
        inner = strict() if inner is None else inner
        while isinstance(inner, NoPickle):
            inner = inner.inner
        self.inner: SerializerProtocol
        if getattr(inner, "pickle_fallback", False):
            raise durable.ConfigurationError(
                "DurableSaver never stores pickle: its serializer falls back to pickle "
                "(JsonPlusSerializer(pickle_fallback=True)). Leave serde= out, or pass "
                "JsonPlusSerializer(pickle_fallback=False); values of your own classes go in as "
                "pydantic models or dataclasses with saver.with_allowlist([(module, name)])."
            )
        self.inner = inner

    def dumps(self, obj: Any) -> bytes:  # pragma: no cover - LangGraph calls the typed methods
        """Not used by savers: ``dumps_typed`` is."""
        raise NotImplementedError

    def loads(self, data: bytes) -> Any:  # pragma: no cover - LangGraph calls the typed methods
        """Not used by savers: ``loads_typed`` is."""
        raise NotImplementedError

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """``obj`` as ``(type, bytes)``; ``SerializationError`` for a value only pickle could hold."""
        try:
            type_, data = self.inner.dumps_typed(obj)
        except Exception as exc:
            if isinstance(exc, durable.DurableError):
                raise
            raise durable.SerializationError(
                f"a graph checkpoint holds a {type(obj).__qualname__} that LangGraph's serializer "
                f"cannot store ({type(exc).__name__}: {exc}). Keep channel values to JSON data, "
                "messages, pydantic models or dataclasses."
            ) from exc
        if _kind(type_) not in KINDS:
            raise durable.SerializationError(
                f"DurableSaver refused to store a {type(obj).__qualname__} serialized as {type_!r}: "
                "rows are never pickled. Keep channel values to JSON data, messages, pydantic "
                "models or dataclasses."
            )
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The value of a stored ``(type, bytes)``; a ``pickle`` row is refused, never unpickled."""
        type_ = data[0]
        if _kind(type_) not in KINDS:
            raise durable.SerializationError(
                f"a stored graph checkpoint row has serialization type {type_!r}; DurableSaver "
                "never unpickles (a pickle can run code). It was written by another saver or by "
                "hand: delete the thread (saver.delete_thread) or rewrite it without pickle."
            )
        return self.inner.loads_typed(data)

    def with_allowlist(self, extra: Collection[tuple[str, ...]]) -> NoPickle:
        """This serializer, also rebuilding the classes ``extra`` names (``(module, name)``)."""
        inner = self.inner
        if isinstance(inner, JsonPlusSerializer):
            return NoPickle(inner.with_msgpack_allowlist(extra))
        return self
