"""JSON through pydantic: dumping, rebuilding and hashing values.

Every value that enters the log goes through a ``TypeAdapter`` of its
annotated type; nothing is pickled. Adapters are built once per annotation.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import json.encoder
import re
from functools import lru_cache
from typing import Any

import pydantic_core
from pydantic import TypeAdapter

from ..errors import SerializationError
from ._roundtrip import INT_BITS, Output, not_stored, unstorable

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode
_canonical = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode

ANY: TypeAdapter[Any] = TypeAdapter(Any)

# ``JSONEncoder.encode`` builds a new C encoder on every call; building it once
# makes a small payload about twice as cheap. No cycle check (``markers``):
# what is dumped here was made JSON-safe by pydantic or by durable itself.
_c_encoder = getattr(json.encoder, "c_make_encoder", None)
_encode = (
    _c_encoder(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    if _c_encoder is not None
    else None
)

# Adapters of the plain JSON types, kept for the life of the process, and the
# exact value types each one dumps and validates unchanged: for those values
# the round trip through pydantic is skipped.
_INT: TypeAdapter[Any] = TypeAdapter(int)
_STR: TypeAdapter[Any] = TypeAdapter(str)
_BOOL: TypeAdapter[Any] = TypeAdapter(bool)
_PLAIN_ADAPTERS = {int: _INT, str: _STR, bool: _BOOL}
_UNCHANGED: dict[int, tuple[type, ...]] = {
    id(ANY): (int, str, bool, type(None)),
    id(_INT): (int,),
    id(_STR): (str,),
    id(_BOOL): (bool,),
}


def dumps(value: Any) -> str:
    """Compact JSON text of an already JSON-safe value."""
    if _encode is not None:
        return "".join(_encode(value, 0))
    return _dumps(value)


def loads(text: str) -> Any:
    """Parse JSON text (an event payload, or many joined as one array)."""
    return pydantic_core.from_json(text)


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, compact) of a JSON-safe value: the text hashes are over."""
    return _canonical(value)


def short_hash(text: str) -> str:
    """The 128-bit hex digest of a text (collisions are not a threat here)."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


json_bytes = pydantic_core.to_json
"""``json_bytes(value) -> bytes``: compact UTF-8 JSON of a JSON-safe value (pydantic-core)."""


BLAKE2B_16 = hashlib.blake2b(digest_size=16)
"""The empty 128-bit BLAKE2b state: a copy costs less than the constructor's keyword parsing."""


def bytes_hash(data: bytes) -> str:
    """The 128-bit hex digest of ``json_bytes`` output (BLAKE2b, 16 bytes)."""
    h = BLAKE2B_16.copy()
    h.update(data)
    return h.hexdigest()


def value_hash(value: Any) -> str:
    """The hash of call inputs and outputs: ``bytes_hash(json_bytes(value))``.

    Logs of format 1 hashed the ``json`` module's text instead; the two agree
    on every value but floats written with an exponent. ``matches`` accepts both.
    """
    return hashlib.blake2b(pydantic_core.to_json(value), digest_size=16).hexdigest()


def matches(recorded: str, value: Any, current: str) -> bool:
    """Whether a recorded input hash is the hash of ``value`` (``current``), in any format.

    Besides today's ``value_hash``, two older forms are accepted: the hash of
    the ``json`` module's text (log format 1) and ``sha256_tag``, which runs
    recorded as their workflow input's hash before inputs had one format.
    """
    if recorded == current or recorded == short_hash(dumps(value)):
        return True
    return recorded.startswith("sha256:") and recorded == sha256_tag(value)


def sha256_tag(value: Any) -> str:
    """``sha256:<hex>`` over the canonical JSON of ``value``: the manifest hash format."""
    return "sha256:" + hashlib.sha256(canonical(value).encode()).hexdigest()


@lru_cache(maxsize=4096)
def _adapter_cached(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def adapter(annotation: Any) -> TypeAdapter[Any]:
    """The cached ``TypeAdapter`` of an annotation (``Any`` when there is none)."""
    if annotation is Any or annotation is None.__class__:
        return ANY
    plain = _PLAIN_ADAPTERS.get(annotation) if isinstance(annotation, type) else None
    if plain is not None:
        return plain
    try:
        return _adapter_cached(annotation)
    except TypeError:  # unhashable annotation objects are rare; build them each time
        return TypeAdapter(annotation)


def unchanged_types(ad: TypeAdapter[Any]) -> tuple[type, ...]:
    """The exact value types that ``ad`` dumps and validates unchanged (maybe none)."""
    return _UNCHANGED.get(id(ad), ())


def to_json(
    ad: TypeAdapter[Any] | Output, value: Any, *, what: str, run_id: str | None, path: str | None
) -> Any:
    """Dump ``value`` to a JSON-safe structure, or raise ``SerializationError``.

    Through a function's ``Output`` (``Spec.out``) the round-trip rule applies:
    a value that would not come back from the log as itself is refused.
    """
    same = _UNCHANGED.get(id(ad))
    if same is not None and type(value) in same:
        if type(value) is not int or value.bit_length() < INT_BITS:
            return value
        raise SerializationError(
            f"{what} at path {path!r} in run {run_id!r} is an int of more than 4,300 digits, which "
            f"Python cannot read back from the log. Pass it as a str instead. {not_stored(run_id)}",
            run_id=run_id,
            path=path,
        )
    if isinstance(ad, Output):
        t = type(value)
        if t in ad.same or (t is int and ad.ints and value.bit_length() < INT_BITS):
            return value  # what Output.dump returns first, without the call
    if inspect.isawaitable(value):
        _close(value)
        raise SerializationError(
            f"{what} at path {path!r} in run {run_id!r} is a {type(value).__qualname__} that "
            "was never awaited: an `await` is probably missing (write `return await f(...)` "
            "or `x = await f(...)`, not `f(...)`).",
            run_id=run_id,
            path=path,
        )
    if isinstance(ad, Output):
        return ad.dump(value, what=what, run_id=run_id, path=path)
    try:
        return ad.dump_python(value, mode="json", warnings="error")
    except Exception as exc:
        raise unstorable(f"{what} at path {path!r} in run {run_id!r}", value, exc, run_id, path) from exc


_LONG_DIGITS = re.compile(rb"\d{4301}")
"""A run of more digits than Python reads back as an int by default (4,300)."""


def _close(value: Any) -> None:
    """Close a coroutine that will never run, so Python does not also warn it was never awaited."""
    close = getattr(value, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # only tidying up before the real error
            return


LONG_INT_DIGITS = 4300
"""Python reads back ints of at most this many digits by default: only a longer payload can hold one."""


def stored_bytes(data: Any, *, what: str, run_id: str | None, path: str | None) -> bytes:
    """``json_bytes(data)`` of a value about to be logged, or ``SerializationError``.

    ``to_json`` passes strings through unchanged; a string holding a lone
    surrogate (which UTF-8 cannot encode) is caught here, before any event
    that holds it is buffered. So is an int too long to be read back
    (``readable``).
    """
    try:
        raw = json_bytes(data)
    except ValueError as exc:
        raise SerializationError(
            f"{what} at path {path!r} in run {run_id!r} cannot be stored as JSON: {exc}. "
            "Strings must be valid Unicode text (no lone surrogates).",
            run_id=run_id,
            path=path,
        ) from exc
    if len(raw) > LONG_INT_DIGITS:
        readable(raw, what=what, run_id=run_id, path=path)
    return raw


def readable(raw: bytes, *, what: str, run_id: str | None, path: str | None) -> None:
    """Raise ``SerializationError`` if encoded JSON holds an int too long to be read back.

    Only a payload with a run of more than 4,300 digits is parsed to make sure.
    """
    if _LONG_DIGITS.search(raw) is not None:
        try:
            loads(raw.decode())
        except ValueError as exc:
            raise SerializationError(
                f"{what} at path {path!r} in run {run_id!r} cannot be stored: it holds an int "
                f"that could not be read back ({exc}). Store such a number as a str, or keep it "
                f"in an artifact. {not_stored(run_id)}",
                run_id=run_id,
                path=path,
            ) from None
