"""Metadata filters of memory searches, compiled to one SQL condition.

Pure: ``compile_filter`` takes the filter the caller wrote and returns an SQL
expression over the ``metadata`` JSON column with its parameters, so the
filter runs inside the query that picks the nearest items, before the top-k
cut. The syntax::

    {"kind": "fact"}                        # equality (shorthand of $eq)
    {"score": {"$gte": 0.5, "$lt": 0.9}}    # several operators on one field: all hold
    {"lang": {"$in": ["en", "fr"]}}         # one of
    {"kind": "fact", "user": {"$ne": "u2"}} # several fields: all hold

A field is a top-level metadata key, or a dotted path into nested objects
(``"source.site"``). Values are strings, numbers, booleans or ``None``.
Comparisons are typed: ``1`` never equals ``"1"`` nor ``True``, and
``$gt``/``$gte``/``$lt``/``$lte`` compare numbers with numbers and strings
with strings. ``$ne`` also matches items that do not have the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import MemoryStoreError

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in")
_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_NUMBER_TYPES = "('integer','real')"


def _json_path(field: str) -> str:
    if not isinstance(field, str) or not field or any(not part for part in field.split(".")):
        raise MemoryStoreError(
            f"filter field {field!r} is not usable: use a metadata key, or a dotted path of "
            "non-empty keys such as 'source.site'."
        )
    return "$" + "".join('."' + part.replace('"', '\\"') + '"' for part in field.split("."))


def _scalar(field: str, op: str, value: Any) -> None:
    if value is None or isinstance(value, str | bool | int | float):
        return
    raise MemoryStoreError(
        f"filter {field!r} {op} got {value!r} ({type(value).__name__}); filter values are "
        "strings, numbers, booleans or None."
    )


def _equal(column: str, path: str, value: Any) -> tuple[str, list[Any]]:
    """``json_type`` pins the JSON type, so 1, 1.0, true and "1" stay apart as they should."""
    if value is None:
        return f"json_type({column}, ?) = 'null'", [path]
    if isinstance(value, bool):
        return f"json_type({column}, ?) = ?", [path, "true" if value else "false"]
    if isinstance(value, str):
        return f"(json_type({column}, ?) = 'text' AND json_extract({column}, ?) = ?)", [
            path,
            path,
            value,
        ]
    return (
        f"(json_type({column}, ?) IN {_NUMBER_TYPES} AND json_extract({column}, ?) = ?)",
        [path, path, value],
    )


def _range(column: str, path: str, field: str, op: str, value: Any) -> tuple[str, list[Any]]:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise MemoryStoreError(
            f"filter {field!r} {op} needs a number or a string to compare with, not {value!r}."
        )
    kind = "= 'text'" if isinstance(value, str) else f"IN {_NUMBER_TYPES}"
    return (
        f"(json_type({column}, ?) {kind} AND json_extract({column}, ?) {_RANGE_SQL[op]} ?)",
        [path, path, value],
    )


def _operator(column: str, field: str, path: str, op: str, value: Any) -> tuple[str, list[Any]]:
    if op == "$eq":
        _scalar(field, op, value)
        return _equal(column, path, value)
    if op == "$ne":
        _scalar(field, op, value)
        sql, params = _equal(column, path, value)
        # A missing field makes the test NULL; COALESCE turns that into "not equal".
        return f"NOT COALESCE({sql}, 0)", params
    if op in _RANGE_SQL:
        return _range(column, path, field, op, value)
    if op == "$in":
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
            raise MemoryStoreError(f"filter {field!r} $in takes a list of values, not {value!r}.")
        if not value:
            return "0", []
        parts: list[str] = []
        in_params: list[Any] = []
        for v in value:
            _scalar(field, op, v)
            sql, p = _equal(column, path, v)
            parts.append(sql)
            in_params.extend(p)
        return "(" + " OR ".join(parts) + ")", in_params
    raise MemoryStoreError(
        f"filter {field!r} uses the unknown operator {op!r}; the operators are {', '.join(OPERATORS)}."
    )


def compile_filter(filter: Mapping[str, Any] | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """The SQL condition and parameters that select the items ``filter`` matches.

    Args:
        filter: ``{field: value}`` or ``{field: {"$op": value, ...}}``; ``None``
            or ``{}`` match everything.
        column: The SQL expression holding the metadata JSON text.

    Returns:
        ``(sql, params)``; ``sql`` is ``"1"`` when everything matches.

    Raises:
        MemoryStoreError: An unknown operator, a bad field or a value of the wrong type.

    Example:
        >>> compile_filter({"kind": "fact"})[0]
        "(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)"
    """
    if not filter:
        return "1", []
    if not isinstance(filter, Mapping):
        raise MemoryStoreError(
            f"filter must be a dict such as {{'kind': 'fact'}}, not {type(filter).__name__}."
        )
    parts: list[str] = []
    params: list[Any] = []
    for field, cond in filter.items():
        path = _json_path(field)
        ops: Mapping[str, Any]
        if isinstance(cond, Mapping):
            if not cond:
                raise MemoryStoreError(f"filter {field!r} has an empty condition {{}}.")
            ops = cond
        else:
            ops = {"$eq": cond}
        for op, value in ops.items():
            sql, p = _operator(column, field, path, op, value)
            parts.append(sql)
            params.extend(p)
    return " AND ".join(parts), params
