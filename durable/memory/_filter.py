"""Metadata filters of memory searches, compiled to one SQL condition, for SQLite or PostgreSQL.

Pure: ``compile_filter`` takes the filter the caller wrote and returns an SQL
expression over a metadata JSON column with its parameters, so the filter
runs inside the query that picks the nearest items, before the top-k cut.
The rules are checked once, here; a ``Dialect`` only spells each test in its
database's JSON functions (SQLite's ``json_type``/``json_extract``,
PostgreSQL's ``jsonb``), so both stores select the same items. The syntax::

    {"kind": "fact"}                        # equality (shorthand of $eq)
    {"score": {"$gte": 0.5, "$lt": 0.9}}    # several operators on one field: all hold
    {"lang": {"$in": ["en", "fr"]}}         # one of
    {"kind": "fact", "user": {"$ne": "u2"}} # several fields: all hold

A field is a top-level metadata key, or a dotted path into nested objects
(``"source.site"``). Values are strings, finite numbers, booleans or
``None``. Comparisons are typed: ``1`` never equals ``"1"`` nor ``True``,
and ``$gt``/``$gte``/``$lt``/``$lte`` compare numbers with numbers and
strings with strings (by code point). ``$ne`` also matches items that do
not have the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..errors import MemoryStoreError

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in")
_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_NUMBER_TYPES = "('integer','real')"

Sql = tuple[str, list[Any]]


class Dialect:
    """How one database spells the tests of a filter over a JSON column (SQLite's, by default)."""

    true = "1"
    false = "0"

    def path(self, parts: list[str]) -> Any:
        """The parameter that addresses a field: SQLite's JSON path ``$."a"."b"``."""
        return "$" + "".join('."' + part.replace('"', '\\"') + '"' for part in parts)

    def equal(self, column: str, path: Any, value: Any) -> Sql:
        """``json_type`` pins the JSON type, so 1, 1.0, true and "1" stay apart as they should."""
        if value is None:
            return f"json_type({column}, ?) = 'null'", [path]
        if isinstance(value, bool):
            return f"json_type({column}, ?) = ?", [path, "true" if value else "false"]
        kind = "= 'text'" if isinstance(value, str) else f"IN {_NUMBER_TYPES}"
        return f"(json_type({column}, ?) {kind} AND json_extract({column}, ?) = ?)", [path, path, value]

    def compare(self, column: str, path: Any, op: str, value: str | int | float) -> Sql:
        """A range test of a number against numbers, or of a string against strings."""
        kind = "= 'text'" if isinstance(value, str) else f"IN {_NUMBER_TYPES}"
        return (
            f"(json_type({column}, ?) {kind} AND json_extract({column}, ?) {op} ?)",
            [path, path, value],
        )

    def not_true(self, sql: str) -> str:
        """True where ``sql`` is false or unknown (a missing field makes a test NULL)."""
        return f"NOT COALESCE({sql}, 0)"


class PostgresDialect(Dialect):
    """The same tests over a ``jsonb`` value, with ``%s`` parameters.

    Equality is ``jsonb`` equality (typed: ``1 = 1.0`` but ``1 <> "1"``);
    numbers compare as ``jsonb`` numbers, strings as text in the ``C``
    collation (by code point, as SQLite and Python compare them), whatever
    the database's own collation.
    """

    true = "TRUE"
    false = "FALSE"

    def path(self, parts: list[str]) -> Any:
        return parts

    def equal(self, column: str, path: Any, value: Any) -> Sql:
        return f"({column} #> %s::text[]) = %s::jsonb", [path, json.dumps(value)]

    def compare(self, column: str, path: Any, op: str, value: str | int | float) -> Sql:
        field = f"({column} #> %s::text[])"
        if isinstance(value, str):
            return (
                f"(jsonb_typeof({field}) = 'string' AND ({column} #>> %s::text[]) COLLATE \"C\" {op} %s)",
                [path, path, value],
            )
        number = f"(jsonb_typeof({field}) = 'number' AND {field} {op} %s::jsonb)"
        return number, [path, path, json.dumps(value)]

    def not_true(self, sql: str) -> str:
        return f"NOT COALESCE({sql}, FALSE)"


SQLITE = Dialect()
POSTGRES = PostgresDialect()


def _parts(field: str) -> list[str]:
    if not isinstance(field, str) or not field or any(not part for part in field.split(".")):
        raise MemoryStoreError(
            f"filter field {field!r} is not usable: use a metadata key, or a dotted path of "
            "non-empty keys such as 'source.site'."
        )
    return field.split(".")


def _scalar(field: str, op: str, value: Any) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float) and math.isfinite(value):
        return
    raise MemoryStoreError(
        f"filter {field!r} {op} got {value!r} ({type(value).__name__}); filter values are "
        "strings, finite numbers, booleans or None."
    )


def _operator(d: Dialect, column: str, field: str, path: Any, op: str, value: Any) -> Sql:
    if op == "$eq":
        _scalar(field, op, value)
        return d.equal(column, path, value)
    if op == "$ne":
        _scalar(field, op, value)
        sql, params = d.equal(column, path, value)
        return d.not_true(sql), params
    if op in _RANGE_SQL:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise MemoryStoreError(
                f"filter {field!r} {op} needs a number or a string to compare with, not {value!r}."
            )
        _scalar(field, op, value)
        return d.compare(column, path, _RANGE_SQL[op], value)
    if op == "$in":
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
            raise MemoryStoreError(f"filter {field!r} $in takes a list of values, not {value!r}.")
        if not value:
            return d.false, []
        parts: list[str] = []
        in_params: list[Any] = []
        for v in value:
            _scalar(field, op, v)
            sql, p = d.equal(column, path, v)
            parts.append(sql)
            in_params.extend(p)
        return "(" + " OR ".join(parts) + ")", in_params
    raise MemoryStoreError(
        f"filter {field!r} uses the unknown operator {op!r}; the operators are {', '.join(OPERATORS)}."
    )


def compile_filter(
    filter: Mapping[str, Any] | None, column: str = "metadata", dialect: Dialect = SQLITE
) -> tuple[str, list[Any]]:
    """The SQL condition and parameters that select the items ``filter`` matches.

    Args:
        filter: ``{field: value}`` or ``{field: {"$op": value, ...}}``; ``None``
            or ``{}`` match everything.
        column: The SQL expression holding the metadata JSON (text for SQLite,
            ``jsonb`` for PostgreSQL).
        dialect: ``SQLITE`` (``?`` parameters) or ``POSTGRES`` (``%s`` parameters).

    Returns:
        ``(sql, params)``; ``sql`` is the dialect's ``true`` when everything matches.

    Raises:
        MemoryStoreError: An unknown operator, a bad field or a value of the wrong type.

    Example:
        >>> compile_filter({"kind": "fact"})[0]
        "(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)"
    """
    if not filter:
        return dialect.true, []
    if not isinstance(filter, Mapping):
        raise MemoryStoreError(
            f"filter must be a dict such as {{'kind': 'fact'}}, not {type(filter).__name__}."
        )
    parts: list[str] = []
    params: list[Any] = []
    for field, cond in filter.items():
        path = dialect.path(_parts(field))
        ops: Mapping[str, Any]
        if isinstance(cond, Mapping):
            if not cond:
                raise MemoryStoreError(f"filter {field!r} has an empty condition {{}}.")
            ops = cond
        else:
            ops = {"$eq": cond}
        for op, value in ops.items():
            sql, p = _operator(dialect, column, field, path, op, value)
            parts.append(sql)
            params.extend(p)
    return " AND ".join(parts), params
