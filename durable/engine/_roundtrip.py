"""The round-trip rule: a stored output comes back from the log as the value the first run saw.

A recorded output is rebuilt from its JSON after a crash. ``Output.dump``
stores a value only when that rebuild gives an equal value, so a replay
never diverges silently: everything else fails at commit, on the first run,
with a ``SerializationError`` that names the path, the field and what to do
(the log is left unchanged and the run resumable).

Plain JSON values (str, int, float, bool, None and lists and dicts of them)
under a plain JSON annotation, or none, come back as themselves as long as
they are exactly those types, with str keys, finite floats and ints Python
can read back; they are checked by one walk and never rebuilt. Every other
value is dumped, rebuilt the way a replay rebuilds it, and compared.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr, TypeAdapter

from ..errors import SerializationError

_INT_DIGITS = 4300
"""Python's default limit on the digits of an int read from text (``sys.set_int_max_str_digits``)."""
INT_BITS = 14_284  # an int below 2**14284 has at most 4,300 digits
_INT_LIMIT = 10**_INT_DIGITS
_PLAIN_TYPES = (str, int, float, bool, type(None))
_UNIONS = (typing.Union, types.UnionType)
_TEXTS = frozenset((str, bool, type(None)))
_INTS = frozenset((int,))
_ANY: TypeAdapter[Any] = TypeAdapter(Any)
_MASK = "**********"


def not_stored(run_id: str | None) -> str:
    """What an error about a refused value adds: nothing of it was logged, and how the run goes on."""
    return (
        "Nothing of it was recorded; a run that fails on it goes on, once the code is fixed, with "
        f"run_workflow(..., retry_failed=True) or `little resume {run_id}` (what it committed "
        "before stays committed)."
    )


def plain_annotation(annotation: Any) -> bool:
    """Whether an annotation only describes JSON (``Any``, scalars, ``list[...]``, ``dict[str, ...]``)."""
    if annotation is Any or annotation in _PLAIN_TYPES or annotation is None:
        return True
    if annotation is list or annotation is dict:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list:
        return all(plain_annotation(a) for a in args)
    if origin is dict:
        return len(args) == 2 and args[0] in (str, Any) and plain_annotation(args[1])
    if origin in _UNIONS:
        return all(plain_annotation(a) for a in args)
    return False


def _not_json(value: Any) -> list[Any] | None:
    """``None`` when ``value`` is JSON the log gives back as itself, else ``[kind, leaf, *path reversed]``."""
    t = type(value)
    if t is str or t is bool or value is None:
        return None
    if t is int:
        if value.bit_length() < INT_BITS or -_INT_LIMIT < value < _INT_LIMIT:
            return None
        return ["int", value]
    if t is float:
        return None if value - value == 0.0 else ["float", value]
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                return ["key", k]
            tv = type(v)
            if tv is str or tv is bool or v is None or (tv is int and v.bit_length() < INT_BITS):
                continue
            bad = _not_json(v)
            if bad is not None:
                bad.append(("item", k))
                return bad
        return None
    if t is list:
        if len(value) > 8:  # long lists: the types first, in C, then a loop only where needed
            kinds = set(map(type, value))
            if kinds <= _TEXTS or (kinds == _INTS and min(value) > -_INT_LIMIT and max(value) < _INT_LIMIT):
                return None
        for v in value:
            tv = type(v)
            if tv is str or tv is bool or v is None or (tv is int and v.bit_length() < INT_BITS):
                continue
            bad = _not_json(v)
            if bad is not None:
                bad.append(("item", _index(value, v)))
                return bad
        return None
    return ["type", value]


def _index(items: list[Any], item: Any) -> int:
    return next(i for i, v in enumerate(items) if v is item)


def _path_text(steps: list[Any]) -> str:
    """``.field['key'][0]`` from the reversed steps a walk returned."""
    return "".join(f".{key}" if kind == "attr" else f"[{key!r}]" for kind, key in reversed(steps))


def _comes_back_as(value: Any) -> str:
    """The type an un-annotated value comes back as after a crash (JSON parsed again)."""
    try:
        data = _ANY.dump_python(value, mode="json", warnings=False)
    except Exception:
        return "something else"
    return type(data).__name__ if data is not None else "None"


def _identity_eq(value: Any) -> bool:
    """Whether a type compares by identity only (two equal rebuilds can never compare equal)."""
    eq: Any = type(value).__eq__
    return eq is object.__eq__


def _difference(a: Any, b: Any, depth: int = 0) -> list[Any] | None:
    """``None`` when the rebuilt ``b`` is the stored ``a``, else ``[a, b, note, *path reversed]``."""
    if a is b:
        return None
    if type(a) is not type(b):
        return [a, b, None]
    if depth > 64:
        return None if a == b else [a, b, None]
    if isinstance(a, SecretStr | SecretBytes):
        return None if a.get_secret_value() == b.get_secret_value() else [a, b, "secret"]
    if isinstance(a, BaseModel):
        for name, info in type(a).model_fields.items():
            bad = _difference(a.__dict__.get(name), b.__dict__.get(name), depth + 1)
            if bad is not None:
                if info.exclude and len(bad) == 3:
                    bad[2] = "excluded"
                bad.append(("attr", name))
                return bad
        extra_a, extra_b = a.__pydantic_extra__ or {}, b.__pydantic_extra__ or {}
        return _difference(extra_a, extra_b, depth + 1) if extra_a or extra_b else None
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            bad = _difference(getattr(a, f.name, None), getattr(b, f.name, None), depth + 1)
            if bad is not None:
                bad.append(("attr", f.name))
                return bad
        return None
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return [a, b, None]
        for k, v in a.items():
            bad = _difference(v, b[k], depth + 1)
            if bad is not None:
                bad.append(("item", k))
                return bad
        return None
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return [a, b, None]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            bad = _difference(x, y, depth + 1)
            if bad is not None:
                bad.append(("item", i))
                return bad
        return None
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    if _identity_eq(a):
        return None  # nothing to compare it by; pydantic rebuilt the same type
    try:
        return None if a == b else [a, b, None]
    except Exception:
        return [a, b, None]


def _show(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Where:
    """How a message names the value (``the output of step 'f' at path ...``), built only on error."""

    __slots__ = ("args",)

    def __init__(self, *args: Any):
        self.args = args

    def __str__(self) -> str:
        what, owner, path, run_id = self.args
        return f"{what} of {owner} at path {path!r} in run {run_id!r}"

    def __format__(self, spec: str) -> str:
        return str(self)


class Output:
    """How a decorated function's outputs are stored and rebuilt: its return adapter and the rule.

    Attributes:
        adapter: The ``TypeAdapter`` of the return annotation (``Any`` without one).
        keep: The types of recorded JSON that ``rebuild`` returns as they are.
        plain: Whether the annotation only describes JSON (checked by one walk, never rebuilt).
        annotation: The return annotation's text, or ``None`` when there is none.
        owner: How messages name the function, e.g. ``step 'fetch' (app.fetch)``.
        ints: Whether ints (of fewer than 4,300 digits) are stored as they are.
        unresolved: A return annotation that could not be resolved (stored as if there were none).
        same: The exact value types stored as they are, unchecked (str, bool, None where the
            annotation keeps them).
    """

    __slots__ = ("adapter", "annotation", "ints", "keep", "owner", "plain", "same", "unresolved")

    def __init__(
        self,
        adapter: TypeAdapter[Any],
        keep: tuple[type, ...],
        *,
        plain: bool,
        annotation: str | None,
        owner: str,
        unresolved: str | None = None,
    ):
        self.adapter = adapter
        self.keep = keep
        self.plain = plain
        self.annotation = annotation
        self.owner = owner
        self.unresolved = unresolved
        self.same = tuple(t for t in keep if t in (str, bool, type(None)))
        self.ints = int in keep

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the return annotation."""
        return self.adapter.json_schema()

    def rebuild(self, data: Any) -> Any:
        """A recorded output (parsed JSON) rebuilt into the return annotation.

        Fields are accepted by name as well as by alias: outputs are stored
        by field name, also for models whose fields have aliases.
        """
        if type(data) in self.keep:
            return data
        return self.adapter.validate_python(data, by_alias=True, by_name=True)

    def dump(self, value: Any, *, what: str, run_id: str | None, path: str | None) -> Any:
        """The JSON-safe data to store for ``value``, or ``SerializationError`` if it would not come back.

        Args:
            value: What the function returned (or yielded).
            what: How the message names the value (``the output``, ``the result``).
            run_id: The run, for the message.
            path: The call's path or effect key, for the message.

        Returns:
            The data to log, which ``rebuild`` turns into a value equal to ``value``.
        """
        t = type(value)
        if t in self.same:
            return value
        if t is int and self.ints and value.bit_length() < INT_BITS:
            return value
        where = _Where(what, self.owner, path, run_id)
        if value is None:  # None is not in ``same``: the annotation may not read it back
            self._check_none(where, run_id, path)
        if self.plain:
            bad = _not_json(value)
            if bad is not None:
                raise self._not_json_error(where, value, bad, run_id, path)
            if t is not dict and t is not list and t in self.keep:
                return value  # a scalar the annotation keeps unchanged
            if self.annotation is not None:
                return self._dump(where, value, run_id, path)
            # Exact JSON already; containers are copied (the caller may change its own later).
            return _ANY.dump_python(value, mode="json")
        data = self._dump(where, value, run_id, path)
        bad = _not_json(data)
        if bad is not None:
            raise self._not_json_error(where, value, bad, run_id, path)
        try:
            back = self.rebuild(data)
        except Exception as exc:
            raise SerializationError(
                f"{where} would be stored as {_show(data)}, which cannot be rebuilt as "
                f"{self.annotation}: {exc}\nReturn a value that {self.annotation} reads back from "
                "its own JSON (for example None instead of Decimal('NaN')), or change the "
                f"annotation. {not_stored(run_id)}",
                run_id=run_id,
                path=path,
            ) from None
        if back == value:
            return data
        diff = _difference(value, back)
        if diff is None:
            return data
        raise self._changed_error(where, diff, run_id, path)

    def _check_none(self, where: Any, run_id: str | None, path: str | None) -> None:
        """Refuse ``None`` when the return annotation does not read it back (``-> int``)."""
        try:
            self.rebuild(None)
        except Exception:
            raise SerializationError(
                f"{where} is None, but the return annotation {self.annotation} does not take None, "
                "so it could not be rebuilt on a resume. Return a value of that type, or annotate "
                f"the return type as {self.annotation} | None. {not_stored(run_id)}",
                run_id=run_id,
                path=path,
            ) from None

    def _dump(self, where: Any, value: Any, run_id: str | None, path: str | None) -> Any:
        try:
            return self.adapter.dump_python(value, mode="json", warnings="error")
        except Exception as exc:
            raise unstorable(where, value, exc, run_id, path) from exc

    def _not_json_error(
        self, where: Any, value: Any, bad: list[Any], run_id: str | None, path: str | None
    ) -> SerializationError:
        kind, leaf, *steps = bad
        at = _path_text(steps)
        field = f"the value at {at}" if at else "the value"
        if kind == "int":
            problem = (
                f"{field} is an int of more than {_INT_DIGITS:,} digits, which Python cannot read "
                "back from the log. Store it as a str (str(n), with sys.set_int_max_str_digits "
                "raised where you convert it), or keep it in an artifact."
            )
        elif kind == "float":
            problem = (
                f"{field} is {leaf!r}, which JSON cannot hold (it would come back as None). "
                "Store None or a string for it, or annotate the return type with a model that says how."
            )
        elif kind == "key":
            problem = (
                f"{field} has the key {leaf!r} of type {type(leaf).__name__}; JSON keys are strings, "
                f"so it would come back as {str(leaf)!r}. "
                + self._annotate_advice(value, "for example dict[int, str]")
            )
        else:
            problem = (
                f"{field} is a {type(leaf).__name__}, which the log stores as JSON and gives "
                f"back as a {_comes_back_as(leaf)} after a crash. "
                + self._annotate_advice(value, f"for example -> {type(value).__name__}")
            )
        return SerializationError(
            f"{where} would not come back as itself on replay: {problem} {not_stored(run_id)}",
            run_id=run_id,
            path=path,
        )

    def _annotate_advice(self, value: Any, example: str) -> str:
        if self.unresolved is not None:
            return (
                f"The return annotation of {self.owner}, {self.unresolved!r}, cannot be resolved "
                "(typing.get_type_hints fails on it, for example on a class defined inside a "
                "function): define the type at module level so it can be rebuilt as itself."
            )
        if self.annotation is None:
            return (
                f"Annotate the return type of {self.owner} ({example}) so the value is rebuilt as "
                "itself, or return plain JSON."
            )
        return (
            f"Its return annotation {self.annotation} does not say what it is: annotate it "
            f"precisely ({example}), or return plain JSON."
        )

    def _changed_error(
        self, where: Any, diff: list[Any], run_id: str | None, path: str | None
    ) -> SerializationError:
        stored, rebuilt, note, *steps = diff
        at = _path_text(steps)
        field = f"field {at.lstrip('.')!r}" if at else "the value"
        if note == "secret" or (isinstance(stored, SecretStr | SecretBytes) and _MASK in str(rebuilt)):
            problem = (
                f"{field} is a secret, and pydantic stores secrets masked ({_MASK!r}), so it "
                "would come back masked. Keep secrets out of outputs (read them where they are "
                "used), or give the field a field_serializer that stores its value."
            )
        elif note == "excluded":
            problem = (
                f"{field} is excluded from serialization (Field(exclude=True)), so the log does "
                f"not hold it and it would come back as {_show(rebuilt)} instead of {_show(stored)}. "
                "Include the field, or return a model without it."
            )
        elif type(stored) is not type(rebuilt):
            problem = (
                f"{field} is a {type(stored).__name__} ({_show(stored)}) and would come back "
                f"as a {type(rebuilt).__name__} ({_show(rebuilt)}). Annotate it (the field, or "
                "the return type) with the type it holds; a subclass under its base's annotation "
                "comes back as the base, its own fields lost."
            )
        else:
            problem = (
                f"{field} is {_show(stored)} and would come back as {_show(rebuilt)}: a validator "
                "or serializer changes it on the way back (a validator that transforms its input, "
                "such as cents * 100, runs again on every rebuild). Make the validator accept its "
                "own output unchanged, or transform the value before building the model."
            )
        return SerializationError(
            f"{where} would not come back as itself on replay: {problem} {not_stored(run_id)}",
            run_id=run_id,
            path=path,
        )


def unstorable(
    where: Any, value: Any, exc: Exception, run_id: str | None, path: str | None
) -> SerializationError:
    """The ``SerializationError`` for a value pydantic cannot dump at all."""
    return SerializationError(
        f"{where}, of type {type(value).__qualname__}, cannot be stored as JSON: {exc}. Return "
        "pydantic models, dataclasses or plain JSON types, or annotate the function so pydantic "
        "knows how to serialize it.",
        run_id=run_id,
        path=path,
    )
